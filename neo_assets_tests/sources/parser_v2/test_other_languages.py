"""Parser 2.x on Go, Rust, C, C++, Java, C#, Ruby, PHP and bash: kinds, names, line
ranges, parents, qualified names, nested types and doc comments (samples.py)."""

import pytest

from neo_assets_tests.sources.parser_v2 import samples
from neo_assets_tests.sources.parser_v2.helpers import by_name, outline, parse

EXPECTED = {
    "GO": (
        "cobra/command.go",
        "go",
        [
            ("module", "cobra/command.go", 1, 19, None, "cobra"),
            ("class", "Command", 9, 14, None, "cobra.Command"),
            ("type", "PositionalArgs", 17, 17, None, "cobra.PositionalArgs"),
            ("class", "Hook", 18, 18, None, "cobra.Hook"),
            ("method", "Command.Execute", 21, 26, "Command", "cobra.Command.Execute"),
            ("method", "Command.Name", 28, 28, "Command", "cobra.Command.Name"),
            ("function", "Eq", 30, 33, None, "cobra.Eq"),
        ],
    ),
    "RUST": (
        "src/lib.rs",
        "rust",
        [
            ("module", "src/lib.rs", 1, 45, None, "src/lib.rs"),
            ("class", "WalkDir", 4, 9, None, "WalkDir"),
            ("class", "impl WalkDir", 11, 21, None, "impl WalkDir"),
            ("method", "WalkDir.new", 12, 15, "WalkDir", "WalkDir.new"),
            ("method", "WalkDir.min_depth", 17, 20, "WalkDir", "WalkDir.min_depth"),
            (
                "class",
                "impl IntoIterator for WalkDir",
                23,
                29,
                None,
                "impl IntoIterator for WalkDir",
            ),
            ("type", "WalkDir.Item", 24, 24, "WalkDir", "WalkDir.Item"),
            ("method", "WalkDir.into_iter", 26, 28, "WalkDir", "WalkDir.into_iter"),
            ("class", "Error", 31, 33, None, "Error"),
            ("function", "is_same_file", 35, 37, None, "is_same_file"),
            ("function", "tests.walks", 41, 44, None, "tests.walks"),
        ],
    ),
    "C": (
        "src/point.c",
        "c",
        [
            ("module", "src/point.c", 1, 21, None, "src/point.c"),
            ("class", "point", 3, 7, None, "point"),
            ("class", "list", 9, 11, None, "list"),
            ("function", "norm2", 13, 17, None, "norm2"),
            ("function", "dump", 20, 20, None, "dump"),
            ("function", "main", 23, 26, None, "main"),
        ],
    ),
    "CPP": (
        "src/widget.cpp",
        "cpp",
        [
            ("module", "src/widget.cpp", 1, 21, None, "src/widget.cpp"),
            ("class", "gfx.Widget", 5, 19, None, "gfx.Widget"),
            ("method", "gfx.Widget.Widget", 9, 9, "gfx.Widget", "gfx.Widget.Widget"),
            ("class", "gfx.Widget.Style", 12, 15, "gfx.Widget", "gfx.Widget.Style"),
            (
                "method",
                "gfx.Widget.Style.width",
                14,
                14,
                "gfx.Widget.Style",
                "gfx.Widget.Style.width",
            ),
            ("method", "gfx.Widget.draw", 23, 25, "gfx.Widget", "gfx.Widget.draw"),
            ("function", "main", 27, 27, None, "main"),
        ],
    ),
    "JAVA": (
        "src/LruCache.java",
        "java",
        [
            ("module", "src/LruCache.java", 1, 3, None, "org.example.cache"),
            ("class", "LruCache", 5, 35, None, "org.example.cache.LruCache"),
            (
                "method",
                "LruCache.LruCache",
                12,
                15,
                "LruCache",
                "org.example.cache.LruCache.LruCache",
            ),
            ("method", "LruCache.get", 17, 20, "LruCache", "org.example.cache.LruCache.get"),
            ("class", "LruCache.Node", 22, 28, "LruCache", "org.example.cache.LruCache.Node"),
            (
                "method",
                "LruCache.Node.next",
                25,
                27,
                "LruCache.Node",
                "org.example.cache.LruCache.Node.next",
            ),
            ("class", "LruCache.Policy", 30, 34, "LruCache", "org.example.cache.LruCache.Policy"),
            (
                "method",
                "LruCache.Policy.evicts",
                33,
                33,
                "LruCache.Policy",
                "org.example.cache.LruCache.Policy.evicts",
            ),
        ],
    ),
    "CSHARP": (
        "src/Invoice.cs",
        "csharp",
        [
            ("module", "src/Invoice.cs", 1, 27, None, "src/Invoice.cs"),
            ("class", "Acme.Billing.Invoice", 5, 21, None, "Acme.Billing.Invoice"),
            (
                "method",
                "Acme.Billing.Invoice.Invoice",
                11,
                14,
                "Acme.Billing.Invoice",
                "Acme.Billing.Invoice.Invoice",
            ),
            (
                "method",
                "Acme.Billing.Invoice.WithTax",
                16,
                20,
                "Acme.Billing.Invoice",
                "Acme.Billing.Invoice.WithTax",
            ),
            ("class", "Acme.Billing.IPayable", 23, 26, None, "Acme.Billing.IPayable"),
            (
                "method",
                "Acme.Billing.IPayable.Pay",
                25,
                25,
                "Acme.Billing.IPayable",
                "Acme.Billing.IPayable.Pay",
            ),
        ],
    ),
    "RUBY": (
        "app/invoice.rb",
        "ruby",
        [
            ("module", "app/invoice.rb", 1, 1, None, "app/invoice.rb"),
            ("class", "Billing", 3, 25, None, "Billing"),
            ("class", "Billing.Invoice", 5, 24, "Billing", "Billing.Invoice"),
            ("method", "Billing.Invoice.total", 10, 13, "Billing.Invoice", "Billing.Invoice.total"),
            ("method", "Billing.Invoice.open", 15, 17, "Billing.Invoice", "Billing.Invoice.open"),
            ("method", "Billing.Invoice.build", 20, 22, "Billing.Invoice", "Billing.Invoice.build"),
            ("function", "helper", 27, 29, None, "helper"),
        ],
    ),
    "PHP": (
        "app/UserController.php",
        "php",
        [
            ("module", "app/UserController.php", 1, 5, None, "App.Http.Controllers"),
            ("class", "UserController", 7, 22, None, "App.Http.Controllers.UserController"),
            (
                "method",
                "UserController.show",
                15,
                21,
                "UserController",
                "App.Http.Controllers.UserController.show",
            ),
            ("function", "helper", 24, 27, None, "App.Http.Controllers.helper"),
        ],
    ),
    "BASH": (
        "bin/run.sh",
        "bash",
        [
            ("module", "bin/run.sh", 1, 14, None, "bin/run.sh"),
            ("function", "usage", 4, 8, None, "usage"),
            ("function", "main", 10, 12, None, "main"),
        ],
    ),
}


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_units_names_lines_parents(sample: str) -> None:
    path, language, expected = EXPECTED[sample]
    result = parse(path, getattr(samples, sample))
    assert result.language == language
    assert result.fallback_reason is None
    got = [
        (c.kind, c.name, c.start_line, c.end_line, c.parent, c.qualified_name)
        for c in result.chunks
    ]
    assert got == expected


@pytest.mark.parametrize(
    ("sample", "path", "unit", "starts_with"),
    [
        ("GO", "cobra/command.go", "Command.Execute", "// Execute uses the args"),
        ("GO", "cobra/command.go", "Command", "// Command is just that"),
        ("RUST", "src/lib.rs", "WalkDir", "/// A builder to create an iterator"),
        ("RUST", "src/lib.rs", "WalkDir.new", "    /// Create a builder"),
        ("RUST", "src/lib.rs", "tests.walks", "    #[test]"),
        ("C", "src/point.c", "norm2", "/* Distance squared"),
        ("CPP", "src/widget.cpp", "gfx.Widget", "// A drawable widget.\ntemplate <typename T>"),
        (
            "JAVA",
            "src/LruCache.java",
            "LruCache",
            "/**\n * A least-recently-used cache.\n */\n@ThreadSafe",
        ),
        ("JAVA", "src/LruCache.java", "LruCache.get", "    @Override"),
        ("CSHARP", "src/Invoice.cs", "Acme.Billing.Invoice", "    /// <summary>An invoice."),
        ("RUBY", "app/invoice.rb", "Billing.Invoice.total", "    # Total with tax."),
        (
            "PHP",
            "app/UserController.php",
            "UserController",
            "/**\n * Handles users.\n */\n#[Controller]",
        ),
        ("BASH", "bin/run.sh", "usage", "# Print usage and exit."),
    ],
)
def test_doc_comments_and_annotations_belong_to_the_unit(
    sample: str, path: str, unit: str, starts_with: str
) -> None:
    assert by_name(path, getattr(samples, sample))[unit].content.startswith(starts_with)


def test_class_chunk_keeps_fields_not_methods() -> None:
    cache = by_name("src/LruCache.java", samples.JAVA)["LruCache"]
    assert "private final int capacity;" in cache.content
    assert "public V get" not in cache.content
    assert "K key;" not in cache.content  # the nested class is its own chunk


def test_go_module_keeps_package_imports_and_grouped_type_header() -> None:
    module = by_name("cobra/command.go", samples.GO)["cobra/command.go"]
    assert module.content.startswith("// Copyright 2013-2023 The Cobra Authors\npackage cobra")
    assert "type (" in module.content
    assert "func " not in module.content


def test_rust_impl_header_without_its_methods() -> None:
    chunks = by_name("src/lib.rs", samples.RUST)
    assert chunks["impl WalkDir"].content == "impl WalkDir {\n\n}"
    trait_impl = chunks["impl IntoIterator for WalkDir"].content
    assert "type Item" not in trait_impl  # the associated type is its own unit
    assert "fn into_iter" not in trait_impl


def test_outline_helper_agrees() -> None:
    assert outline("bin/run.sh", samples.BASH)[1] == ("function", "usage", 4, 8)

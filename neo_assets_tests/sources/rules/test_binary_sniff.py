"""Binary sniffing by content: magic numbers and the share of control bytes, not only NUL."""

from pathlib import Path

import pytest

from neo_assets.sources.rules.path_rules import binary_signature, looks_binary

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_real_pdf_head_without_nul_is_binary() -> None:
    # The first 4 KiB of sindresorhus/ky's media/logo.ai (a PDF-based Illustrator file,
    # 155 KB): XMP metadata text, no NUL byte; the NUL-only rule let it through.
    head = (FIXTURES / "ky-logo-ai-head.pdf").read_bytes()
    assert b"\x00" not in head
    assert looks_binary(head)
    assert binary_signature(head) == "pdf"


@pytest.mark.parametrize(
    ("head", "signature"),
    [
        (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj", "pdf"),
        (b"\x89PNG\r\n\x1a\n" + b"IHDR", "png"),
        (b"\xff\xd8\xff\xe0" + b"JFIF", "jpeg"),
        (b"GIF89a" + b"\x01\x02", "gif"),
        (b"GIF87a", "gif"),
        (b"PK\x03\x04" + b"rest", "zip"),
        (b"\x1f\x8b\x08", "gzip"),
        (b"\x7fELF\x02\x01\x01", "elf"),
        (b"\xcf\xfa\xed\xfe", "mach-o"),
        (b"\xca\xfe\xba\xbe", "mach-o"),
        (b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" + b"\x00" * 54, "pe"),
        (b"%!PS-Adobe-3.0 EPSF-3.0\n", "postscript"),
        (b"\x00asm\x01\x00\x00\x00", "wasm"),
        (b"SQLite format 3\x00", "sqlite"),
        (b"BZh91AY&SY", "bzip2"),
        (b"\xfd7zXZ\x00", "xz"),
        (b"7z\xbc\xaf\x27\x1c", "7z"),
        (b"\x28\xb5\x2f\xfd", "zstd"),
        (b"RIFF\x00\x00\x00\x00WEBP", "riff"),
        (b"wOFF", "woff"),
        (b"wOF2", "woff"),
        (b"\x00\x01\x00\x00\x00", "truetype"),
        (b"OTTO", "opentype"),
        (b"ID3\x03", "mp3"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole"),
        (b"\x00\x00\x01\x00", "ico"),
    ],
)
def test_magic_numbers(head: bytes, signature: str) -> None:
    assert binary_signature(head) == signature
    assert looks_binary(head)


def test_control_bytes_without_nul_are_binary() -> None:
    noisy = bytes(range(1, 9)) * 64 + b"text" * 10
    assert b"\x00" not in noisy
    assert binary_signature(noisy) == "control-bytes"
    assert looks_binary(noisy)


@pytest.mark.parametrize(
    "text",
    [
        b"package main\n\nfunc main() {}\n",
        b"\tindented\r\nwith tabs\x0c form feed\n",
        "caf\u00e9 \u2014 na\u00efve \u65e5\u672c\u8a9e\n".encode(),
        b"\x1b[31mred\x1b[0m terminal log line\n" * 5,
        b"MZ is a word at the start\n",  # 'MZ' then text: not a PE header
        b"PK is not a zip without 03 04\n",
        b"",
    ],
)
def test_text_is_not_binary(text: bytes) -> None:
    assert binary_signature(text) is None
    assert not looks_binary(text)

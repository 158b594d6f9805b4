"""The secret rules over plain strings: every planted kind caught on its line, and the
look-alikes of ordinary code never."""

import pytest

from neo_assets.secrets.rules import (
    DEFAULT_SECRET_FILE_GLOBS,
    RULES,
    Finding,
    has_secret,
    looks_random,
    scan,
)
from neo_assets.sources.rules.path_rules import is_excluded
from neo_assets_tests.secrets import planted


@pytest.mark.parametrize(("path", "text", "rule", "line"), planted.PLANTED)
def test_every_planted_kind_is_caught_on_its_line(path: str, text: str, rule: str, line: int):
    found = scan(text, path)
    assert Finding(rule, line) in found, found
    assert has_secret(text, path)


def test_a_finding_names_the_rule_and_line_never_the_secret():
    text = f"x = 1\nSTRIPE = '{planted.STRIPE_LIVE}'\n"
    [finding] = [f for f in scan(text) if f.rule == "stripe-live-key"]
    assert finding == Finding("stripe-live-key", 2)
    assert planted.STRIPE_LIVE not in repr(scan(text))


def test_every_rule_is_planted():
    assert {r.name for r in RULES} - {rule for _, _, rule, _ in planted.PLANTED} <= {
        # formats covered by their own strings below
        "google-oauth-client-secret",
        "azure-shared-access-key",
        "github-fine-grained-token",
        "gitlab-token",
        "slack-webhook",
        "openai-project-key",
        "anthropic-key",
        "huggingface-token",
        "sendgrid-key",
        "digitalocean-token",
        "shopify-token",
        "telegram-bot-token",
    }


@pytest.mark.parametrize(
    "text",
    [
        # a parser naming the header, not a key
        'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):\n    kind = "rsa"\n',
        # AWS's own documentation key id
        'key_id = "AKIAIOSFODNN7EXAMPLE"\n',
        # placeholders and templates
        'PASSWORD = "changeme"\nSECRET_KEY = "your-secret-key-here"\n',
        'API_KEY = "${API_KEY}"\nTOKEN = "<your token>"\nDB_PASSWORD = "{password}"\n',
        'password = os.environ["DB_PASSWORD"]\ntoken = request.headers.get("X-Token")\n',
        "csrf_token = generate_csrf_token(session)\n",
        # identifiers and ordinary values under secret-ish names
        'CACHE_KEY = "user_profile_v2"\nprimary_key = "id"\nsort_key = "created_at"\n',
        'password_field = "password_confirmation"\nTOKEN_TYPE = "Bearer"\n',
        'const storageKey = "neo-app-state"; const keyCode = 13;\n',
        # URLs: a classic doc example, a template, no password
        'engine = create_engine("postgresql://scott:tiger@localhost/test")\n',
        'url = f"postgres://{user}:{password}@{host}/db"\nu = "https://user@example.com/x"\n',
        'DATABASE_URL = "postgres://user:password@localhost:5432/db"\n',
        # a filler, and a documentation secret in prose
        'token = "0000000000000000000000000000"\n',
    ],
)
def test_look_alikes_are_not_secrets(text: str):
    assert scan(text, "module.py") == []


def test_prose_skips_the_assignment_rule_but_not_the_formats():
    example = (
        "    SECRET_KEY = '192b9bdd22ab9ed4d12e236c78afcb9a393ec15f71bbf5dc987d54727823bcbf'\n"
    )
    assert scan(example, "docs/config.rst") == []
    assert scan(example, "config.py") == [Finding("secret-assignment", 1)]
    pasted = f"Use `{planted.GITHUB_TOKEN}` to log in.\n"
    assert scan(pasted, "README.md") == [Finding("github-token", 1)]


def test_looks_random():
    assert looks_random(planted.PASSWORD_VALUE)
    assert looks_random("a8F3kd92LmQ1")
    assert not looks_random("short1A")  # too short
    assert not looks_random("alllowercaseletters")  # no digit
    assert not looks_random("user_id_2")  # an identifier
    assert not looks_random("has space 123ABC")


@pytest.mark.parametrize(
    ("path", "excluded"),
    [
        (".env", True),
        ("app/.env.production", True),
        (".env.example", True),  # templates too (README: Secrets)
        (".envrc", True),
        ("deploy/server.pem", True),
        ("certs/tls.key", True),
        ("home/.ssh/id_rsa", True),
        ("id_ed25519.pub", True),
        ("android/release.jks", True),
        ("certs/client.p12", True),
        ("win/cert.pfx", True),
        (".npmrc", True),
        ("pkg/.pypirc", True),
        (".netrc", True),
        ("ci/.aws/credentials", True),
        ("config/credentials.json", True),
        ("infra/terraform.tfstate", True),
        ("src/environment.ts", False),
        ("src/keyboard.py", False),
        ("docs/env.md", False),
        ("src/credentials.py", False),
        ("src/monkey.js", False),
    ],
)
def test_default_secret_files(path: str, excluded: bool):
    assert is_excluded(path, DEFAULT_SECRET_FILE_GLOBS) is excluded


@pytest.mark.parametrize(
    "text",
    [
        "GOCSPX-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4",
        "SharedAccessKey=" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0uV=",
        "github_pat_" + "a1B2c3D4e5F6g7H8i9J0k1" + "_" + "Ab3" * 19 + "xz",
        "glpat-" + "a1B2c3D4e5F6g7H8i9J0",
        "https://hooks.slack.com/services/" + "T0123ABCD/B0123ABCD/" + "a1B2c3D4e5F6g7H8i9J0k1L2",
        "sk-proj-" + "a1B2c3D4e5" * 9,
        "sk-ant-api03-" + "a1B2c3D4e5" * 9,
        "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7",
        "SG." + "a1B2c3D4e5F6g7H8i9J0k1" + "." + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0uV1",
        "dop_v1_" + "0123456789abcdef" * 4,
        "shpat_" + "0123456789abcdef" * 2,
        "123456789:AA" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q",
    ],
)
def test_the_other_formats(text: str):
    assert scan(f"value = '{text}'\n", "x.txt"), text

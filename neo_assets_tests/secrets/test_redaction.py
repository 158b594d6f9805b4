"""What a file read or a grep may show of a file: every line holding a secret replaced,
a private key from its BEGIN line to its END line, nothing else touched."""

from neo_assets.secrets.rules import redact, secret_lines
from neo_assets_tests.secrets import planted


def test_each_secret_line_and_a_whole_key_block_are_redacted_and_nothing_else() -> None:
    text = (
        "import os\n"
        f'AWS_ACCESS_KEY_ID = "{planted.AWS_KEY_ID}"\n'
        "def connect():\n"
        f'    return "{planted.DATABASE_URL}"\n'
        f'KEY = """{planted.PRIVATE_KEY}"""\n'
        "print('done')\n"
    )
    shown, lines = redact(text, "app/settings.py")
    assert 2 in lines and 4 in lines
    key_lines = [n for n, line in enumerate(text.split("\n"), 1) if n >= 5 and n <= 12]
    assert set(key_lines) <= set(lines)  # BEGIN, the six body lines, END
    for secret in (planted.AWS_KEY_ID, planted.DB_PASSWORD, *planted.RSA_BODY.split("\n")):
        assert secret not in shown
    kept = shown.split("\n")
    assert kept[0] == "import os" and kept[2] == "def connect():" and "print('done')" in kept
    assert len(kept) == len(text.split("\n"))  # line numbers stay true
    assert "[redacted: this line holds a secret" in kept[1]


def test_a_file_without_secrets_is_unchanged() -> None:
    text = "def add(a, b):\n    return a + b\n"
    assert redact(text, "m.py") == (text, {})
    assert secret_lines("password = os.environ['PASSWORD']\n", "m.py") == {}

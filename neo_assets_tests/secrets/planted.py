"""Planted secrets of each kind, built at run time (no real credential is in this file;
each value is assembled so the source itself does not read as one)."""

import random
import string

_rng = random.Random(36)


def _rand(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"

RSA_BODY = "\n".join(_rand(B64, 64) for _ in range(6))
PRIVATE_KEY = (
    "-----BEGIN RSA " + "PRIVATE KEY-----\n" + RSA_BODY + "\n-----END RSA PRIVATE KEY-----\n"
)
OPENSSH_KEY = (
    "-----BEGIN OPENSSH "
    + "PRIVATE KEY-----\n"
    + RSA_BODY
    + "\n-----END OPENSSH PRIVATE KEY-----\n"
)
AWS_KEY_ID = "AKIA" + _rand(UPPER_DIGITS, 16)
AWS_SECRET = _rand(B64, 40)
STRIPE_LIVE = "sk_" + "live_" + _rand(ALNUM, 24)
GITHUB_TOKEN = "ghp_" + _rand(ALNUM, 36)
DB_PASSWORD = "Zq8" + _rand(ALNUM, 13)
DATABASE_URL = "postgres://admin:" + DB_PASSWORD + "@db.internal:5432/app"
PASSWORD_VALUE = "hT9$kQ2!" + _rand(ALNUM, 10)
GOOGLE_API_KEY = "AIza" + _rand(ALNUM + "-_", 35)
SLACK_TOKEN = "xoxb-" + _rand(string.digits, 12) + "-" + _rand(ALNUM, 24)
OPENAI_KEY = "sk-proj-" + _rand(ALNUM, 20) + "T3Blbk" + "FJ" + _rand(ALNUM, 20)
NPM_TOKEN = "npm_" + _rand(ALNUM, 36)
PYPI_TOKEN = "pypi-" + "AgEIcHlwaS5vcmc" + _rand(ALNUM, 60)
AZURE_CONN = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + _rand(B64, 86) + "==;"

# Each kind, as it would sit in a file: (a file name, its text, the rule, the 1-based line).
PLANTED: list[tuple[str, str, str, int]] = [
    ("settings.py", f'import os\n\nKEY_PEM = """{PRIVATE_KEY}"""\n', "private-key-block", 3),
    ("deploy/id_key.txt", OPENSSH_KEY, "private-key-block", 1),
    ("aws.py", f'ACCESS = "{AWS_KEY_ID}"\n', "aws-access-key-id", 1),
    ("aws2.py", f'\n\naws_secret_access_key = "{AWS_SECRET}"\n', "aws-secret-access-key", 3),
    ("ci.yaml", f"env:\n  token: {GITHUB_TOKEN}\n", "github-token", 2),
    ("pay.js", f"const stripe = require('stripe')('{STRIPE_LIVE}');\n", "stripe-live-key", 1),
    ("db.py", f'engine = create_engine("{DATABASE_URL}")\n', "url-credentials", 1),
    ("conf.py", f'DB_PASSWORD = "{PASSWORD_VALUE}"\n', "secret-assignment", 1),
    ("maps.js", f"const k = '{GOOGLE_API_KEY}';\n", "google-api-key", 1),
    ("bot.py", f"client = WebClient('{SLACK_TOKEN}')\n", "slack-token", 1),
    ("ai.py", f'openai.api_key = "{OPENAI_KEY}"\n', "openai-key", 1),
    ("npm.sh", f"echo //registry.npmjs.org/:_authToken={NPM_TOKEN}\n", "npm-token", 1),
    ("upload.cfg", f"[pypi]\npassword = {PYPI_TOKEN}\n", "pypi-token", 2),
    ("az.cs", f'var c = "{AZURE_CONN}";\n', "azure-storage-account-key", 1),
]

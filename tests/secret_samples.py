"""Secrets and near-misses for the secret guard's tests (docs/concepts/secrets.md).

Each secret is assembled from pieces, so that this file holds none whole; none is real. ``SECRETS``
maps each detector the guard must name to a line holding one of its kind; ``NEAR_MISSES`` are lines
the guard must pass (hashes, ids and images that only look random).
"""

from __future__ import annotations

import base64
import hashlib
import random
import uuid

AWS_KEY = "AKIA" + "Z7VRSQ5TNNSH3PQV"
PRIVATE_KEY_BLOCK = "\n".join([
    "-----BEGIN " + "RSA PRIVATE KEY-----",
    "MIIEowIBAAKCAQEAwhV2" + "kq8sF0aQ1x9X3bLr6t",
    "-----END " + "RSA PRIVATE KEY-----",
])
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
       + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
URL_PASSWORD = "postgres://admin:" + "s3cr3tPassw0rd" + "@db.example.com:5432/app"
KEYWORD = 'api_key = "' + "f8a9c7d6e5b4" + 'a3f2e1d0"'
SLACK_TOKEN = "xoxb-" + "123456789012-123456789012-" + "abcdefghijklmnopqrstuvwx"
STRIPE_KEY = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"

SECRETS = {
    "AWS Access Key": f"- The deploy user's key is {AWS_KEY} (rotate monthly).",
    "Private Key": PRIVATE_KEY_BLOCK.splitlines()[0],
    "GitHub Token": f"- CI pushes with {GITHUB_TOKEN}",
    "JSON Web Token": f"- Session: {JWT}",
    "Basic Auth Credentials": f"- The database is at {URL_PASSWORD}",
    "Secret Keyword": KEYWORD,
    "Slack Token": f"- Bot token {SLACK_TOKEN}",
    "Stripe Access Key": f"- Billing uses {STRIPE_KEY}",
}

_rng = random.Random(35)
_PNG = b"\x89PNG\r\n\x1a\n" + bytes(_rng.randrange(256) for _ in range(1500))
NEAR_MISSES = {
    "a commit hash": "- Fixed in commit " + hashlib.sha1(b"the fix").hexdigest() + ".",
    "a UUID": f"- The run id is {uuid.UUID(int=_rng.getrandbits(128))}.",
    "a base64 PNG data URI": "![chart](data:image/png;base64," + base64.b64encode(_PNG).decode("ascii") + ")",
    "a SHA-256 sum": "- sha256 " + hashlib.sha256(b"release.tar.gz").hexdigest() + "  release.tar.gz",
    "a key word in prose": "- Secretary: Jane Doe keeps the password policy (12 characters) and the api key rota.",
    "an unquoted keyword value": "- api_key = set in the vault, never here",
    "a URL without a password": "- Docs at https://user@example.com/guide and postgres://db.example.com/app",
    # a keyword's quoted value that is plainly words (docs/concepts/secrets.md "What is not a secret")
    "a keyword value of two words, in JSON": '{"api_key": "blue whale", "owner": "ops"}',
    "a keyword value that says where it is": '- password = "ask Marta at the front desk"',
    "a keyword value with a row number": '- db_pass: "in the grey binder (row 3)."',
    "a token that is prose": '- token: "the one from the meeting"',
    "a secret keyword in another script": '- secret = "спроси у Марты"',
}
# Keyword values that stay secrets: random-looking, digits inside a word, a long number, a single word.
KEYWORD_SECRETS = {
    "punctuation and digits": 'password = "hunter2-' + 'Xk9!q7Lm"',
    "a live key": 'api_key: "sk-live-' + 'a8Fq2ZpL0mWx"',
    "two pieces with digits": 'password = "hunter2 ' + 'Xk9"',
    "two runs of consonants": 'secret: "xkqpz ' + 'wmtrv"',
    "a word and a PIN": '"db_pass": "plank ' + '482913"',
    "one word": 'my_secret = "' + 'bluewhale"',
    "mixed case inside a word": 'password = "blue ' + 'wHaLe"',
}

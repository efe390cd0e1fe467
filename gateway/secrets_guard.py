"""The secret guard: text scanned by detect-secrets before the suite itself writes it to memory (docs/concepts/secrets.md).

``find_secrets(text)`` lists where ``text`` holds something detect-secrets flags, each ``Finding``
naming the detector (its ``secret_type``: "AWS Access Key", "Private Key", …) and the line, never
the value. Dreaming skips an op with a finding, the KB refuses a shared note with one, the file API
accepts the PUT and warns, and ``gateway doctor secrets`` reports where secrets already sit.

**The scanner.** detect-secrets 1.5, configured once in this process (its settings are global):
the detectors in ``DETECTORS``, the filters detect-secrets applies by default but two: the allowlist
comment (``pragma: allowlist secret``: the text's author here is a model or an agent, not a reviewer
who allowlisted a line) and the file-exists check (there is no file). Each line is scanned as
detect-secrets scans an ad-hoc string (``scan_line``), so the keyword detector wants its value quoted
(``api_key = "…"``): unquoted it would flag prose such as ``Secretary: Jane``. Quoted, it flags any
value, ``"api_key": "blue whale"`` too, so one filter is added to detect-secrets' own (through its
filter settings, which call it with each potential secret and the plugin that found it): a keyword
value that is plainly words (``plain_words``) is not a secret. The high-entropy
detectors are left out: they flag commit hashes, SHA-256 sums and base64 images, and a real key
with a shape of its own is caught by its detector. So are detectors whose patterns cost more than
they catch (IBM Cloud, SoftLayer, Cloudant, Artifactory: keyword-bound patterns, slow to search).

**Cost.** Scanning line by line through detect-secrets costs tens of microseconds a line, so each
detector's own patterns (and the stems of the keyword detector's key words, ``KEY_WORD_STEMS``) are
first searched once over the whole text, and only the lines they touch are scanned: 0.4 to 1.1 ms
for 4 KB and 9 to 12 ms for 64 KB of text with no secret (docs/concepts/secrets.md). A match on a
line is a match in the whole text that touches that line (the patterns' line-start anchors are
alternatives to a blank or a non-word character, which the newline before the line is), so no line
that holds a finding is passed over.

detect-secrets is loaded at the first scan, never at a process's start
(tests/unit/test_import_budget.py), and without ``requests``, which it imports for a verification the
guard never runs (``gateway.secrets_loading``).
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gateway.errors import InvalidArgument

if TYPE_CHECKING:
    from detect_secrets.core.potential_secret import PotentialSecret

# detect-secrets plugin class names (its ``--list-all-plugins``), each with the secret_type it reports.
DETECTORS: Final = {
    "AWSKeyDetector": "AWS Access Key",
    "AzureStorageKeyDetector": "Azure Storage Account access key",
    "BasicAuthDetector": "Basic Auth Credentials",
    "DiscordBotTokenDetector": "Discord Bot Token",
    "GitHubTokenDetector": "GitHub Token",
    "GitLabTokenDetector": "GitLab Token",
    "JwtTokenDetector": "JSON Web Token",
    "KeywordDetector": "Secret Keyword",
    "MailchimpDetector": "Mailchimp Access Key",
    "NpmDetector": "NPM tokens",
    "OpenAIDetector": "OpenAI Token",
    "PrivateKeyDetector": "Private Key",
    "PypiTokenDetector": "PyPI Token",
    "SendGridDetector": "SendGrid API Key",
    "SlackDetector": "Slack Token",
    "SquareOAuthDetector": "Square OAuth Secret",
    "StripeDetector": "Stripe Access Key",
    "TelegramBotTokenDetector": "Telegram Bot Token",
    "TwilioKeyDetector": "Twilio API Key",
}
# Every key word of detect-secrets' keyword detector (``keyword.DENYLIST``: api_?key, db_?pass,
# passwd, contraseña, …) holds one of these stems, and each of its patterns holds a key word on the
# line it matches: a line with none of them holds no keyword finding. Found with ``str.find`` in the
# case-folded text (casefold matches every character the detector's IGNORECASE matches to these
# letters), an order of magnitude faster than a case-insensitive pattern.
KEY_WORD_STEMS: Final = ("key", "pass", "pwd", "secret", "contrase")
_KEY_WORD_PATTERN: Final = re.compile("|".join(KEY_WORD_STEMS), re.IGNORECASE)
_FILTERS_OFF: Final = (
    "detect_secrets.filters.allowlist.is_line_allowlisted",
    "detect_secrets.filters.common.is_invalid_file",
)
PLAIN_WORDS_FILTER: Final = "gateway.secrets_guard.plain_words"  # detect-secrets imports it by this path
_EDGE_PUNCTUATION: Final = ".,;:!?()[]\"'"
_VOWELS: Final = frozenset("aeiouy")
MAX_NUMBER_DIGITS: Final = 4  # a row, a floor, a year; longer runs of digits are a PIN or an id
MIN_VOWEL_CHECK: Final = 5  # an ASCII word this long with no vowel is not a word ("xkcdq")


def _is_word(token: str) -> bool:
    """A word as prose writes one: letters, with ``'`` or ``-`` only between them (``o'clock``, ``front-desk``),
    all in one case after its first letter (``McKay`` is not, ``xKqP`` is not), and an ASCII word of
    ``MIN_VOWEL_CHECK`` letters or more holds a vowel."""
    letters = token.replace("'", "").replace("-", "")
    if not letters.isalpha() or token[0] in "'-" or token[-1] in "'-":
        return False
    rest = letters[1:]
    if rest != rest.lower() and rest != rest.upper():
        return False
    return not (letters.isascii() and len(letters) >= MIN_VOWEL_CHECK and not _VOWELS & set(letters.lower()))


def plain_words(secret: str, plugin: object) -> bool:
    """detect-secrets' filter (``PLAIN_WORDS_FILTER``): True (not a secret) for a value the keyword detector
    found that is plainly words (docs/concepts/secrets.md "What is not a secret"): whitespace inside it,
    every piece (its ``_EDGE_PUNCTUATION`` stripped) a word (``_is_word``) or a number of at most
    ``MAX_NUMBER_DIGITS`` digits, and at least two words. Every other detector's findings are kept: a
    private key's header is words too."""
    if type(plugin).__name__ != "KeywordDetector":
        return False
    pieces = [p.strip(_EDGE_PUNCTUATION) for p in secret.split()]
    pieces = [p for p in pieces if p]
    if len(pieces) < 2:
        return False
    words = [p for p in pieces if _is_word(p)]
    numbers = [p for p in pieces if p.isdigit() and p.isascii() and len(p) <= MAX_NUMBER_DIGITS]
    return len(words) >= 2 and len(words) + len(numbers) == len(pieces)


@dataclass(frozen=True, order=True)
class Finding:
    """Where a text holds a secret: the line (from 1) and the detector that flagged it. Never the value."""

    line: int
    detector: str

    def says(self) -> str:
        return f"line {self.line}: {self.detector}"


class _Scanner:
    """detect-secrets, configured: the candidate-line patterns, and the per-line scan."""

    def __init__(self) -> None:
        shown = warnings.showwarning
        from gateway.secrets_loading import load

        load()  # detect-secrets without ``requests``, which only its verification uses (gateway.secrets_loading)
        from detect_secrets.core.scan import scan_line
        from detect_secrets.plugins.keyword import KeywordDetector
        from detect_secrets.plugins.base import RegexBasedDetector
        from detect_secrets.settings import get_filters, get_plugins, get_settings

        if warnings.showwarning is not shown:  # its logger module turns on logging.captureWarnings: put it back
            logging.captureWarnings(False)
        settings = get_settings()
        settings.configure_plugins([{"name": name} for name in DETECTORS])
        settings.disable_filters(*_FILTERS_OFF)
        settings.filters[PLAIN_WORDS_FILTER] = {}
        get_filters.cache_clear()
        patterns: list[re.Pattern[str]] = []
        for plugin in get_plugins():
            if isinstance(plugin, RegexBasedDetector):
                patterns += plugin.denylist
            elif not isinstance(plugin, KeywordDetector):  # its lines: ``_key_word_spans``
                raise TypeError(f"{type(plugin).__name__}: no candidate-line pattern for this detector")
        self._patterns = list(dict.fromkeys(patterns))
        self._scan_line: Callable[[str], Iterable[PotentialSecret]] = scan_line

    def candidates(self, text: str) -> list[int]:
        """The indexes (from 0) of the lines of ``text`` (split at ``\\n``) that a pattern touches, in order."""
        starts = [0, *(m.end() for m in re.finditer("\n", text))]
        spans = [*(m.span() for p in self._patterns for m in p.finditer(text)), *_key_word_spans(text)]
        found: set[int] = set()
        for start, end in spans:
            first = bisect.bisect_right(starts, start) - 1
            last = bisect.bisect_right(starts, max(start, end - 1)) - 1
            found.update(range(first, last + 1))
        return sorted(found)

    def scan(self, text: str) -> list[Finding]:
        lines = text.split("\n")
        found = {
            Finding(number + 1, secret.type)
            for number in self.candidates(text)
            for secret in self._scan_line(lines[number])
        }
        return sorted(found)


def _key_word_spans(text: str) -> Iterator[tuple[int, int]]:
    """Where a ``KEY_WORD_STEMS`` stem stands in ``text``, any case."""
    folded = text.casefold()
    if len(folded) != len(text):  # a character folded into more than one: the offsets would drift
        yield from (m.span() for m in _KEY_WORD_PATTERN.finditer(text))
        return
    for stem in KEY_WORD_STEMS:
        at = folded.find(stem)
        while at >= 0:
            yield at, at + len(stem)
            at = folded.find(stem, at + 1)


_lock = threading.Lock()  # detect-secrets keeps its settings and caches in module globals
_scanner: _Scanner | None = None


def find_secrets(text: str) -> list[Finding]:
    """Where ``text`` holds a secret by the guard's detectors (module docstring), by line then
    detector, one finding per detector and line; ``[]`` for none. Thread-safe; never holds a value."""
    global _scanner
    if not text.strip():
        return []
    with _lock:
        if _scanner is None:
            _scanner = _Scanner()
        return _scanner.scan(text)


SHOWN = 10  # findings named in one message; the rest are counted


def describe(findings: Sequence[Finding]) -> str:
    """``findings`` in one phrase: "line 3: AWS Access Key; line 9: Private Key" (the first ``SHOWN``,
    then how many more)."""
    more = f"; and {len(findings) - SHOWN} more" if len(findings) > SHOWN else ""
    return "; ".join(f.says() for f in findings[:SHOWN]) + more


def skip_reason(findings: Iterable[Finding]) -> str:
    """Why text with ``findings`` is skipped: "secret: AWS Access Key (line 3), Private Key (lines 5, 9)"."""
    lines: dict[str, list[str]] = {}
    for f in findings:
        lines.setdefault(f.detector, []).append(str(f.line))
    return "secret: " + ", ".join(
        f"{detector} (line{'s' if len(at) > 1 else ''} {', '.join(at)})" for detector, at in lines.items())


def refuse_secrets(text: str, field: str) -> None:
    """Raise InvalidArgument naming each detector and line when ``text`` (the request's ``field``)
    holds a secret; the value is never in the message."""
    found = find_secrets(text)
    if found:
        raise InvalidArgument(
            f"{field} holds a secret ({describe(found)}): shared notes never keep secrets; take it out "
            "(keep it in a secret store and write where to find it instead) and send the note again"
        )

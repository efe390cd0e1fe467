"""The secret guard (gateway.secrets_guard): each detector's kind of secret is named with its line, the
near-misses pass, the value is never in what it returns or raises, and detect-secrets loads lazily."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from secret_samples import AWS_KEY, KEYWORD_SECRETS, NEAR_MISSES, PRIVATE_KEY_BLOCK, SECRETS

from gateway import secrets_guard
from gateway.errors import InvalidArgument
from gateway.secrets_guard import DETECTORS, Finding, describe, find_secrets, refuse_secrets, skip_reason
from services.dreaming.records.metrics import reason_code

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("detector", sorted(SECRETS))
def test_each_kind_of_secret_is_named_by_its_detector(detector: str) -> None:
    text = f"# Memory\n\n- tea at four\n{SECRETS[detector]}\n- end\n"
    assert Finding(4, detector) in find_secrets(text)


@pytest.mark.parametrize("kind", sorted(NEAR_MISSES))
def test_near_misses_are_not_secrets(kind: str) -> None:
    assert find_secrets(f"# Memory\n\n{NEAR_MISSES[kind]}\n") == []


@pytest.mark.parametrize("kind", sorted(KEYWORD_SECRETS))
def test_a_keyword_value_that_is_not_plainly_words_is_still_a_secret(kind: str) -> None:
    assert find_secrets(f"# Memory\n\n{KEYWORD_SECRETS[kind]}\n") == [Finding(3, "Secret Keyword")]


def test_plain_words_keeps_every_other_detectors_findings() -> None:
    """The filter judges the keyword detector's values only: a private key's header is plain words."""
    from detect_secrets.plugins.keyword import KeywordDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector

    assert secrets_guard.plain_words("blue whale", KeywordDetector())
    assert not secrets_guard.plain_words("BEGIN RSA PRIVATE KEY", PrivateKeyDetector())
    assert find_secrets(PRIVATE_KEY_BLOCK) == [Finding(1, "Private Key")]


def test_a_private_key_block_is_found_at_its_begin_line_and_the_lines_count_from_one() -> None:
    text = f"ok\n\n{PRIVATE_KEY_BLOCK}\nafter {AWS_KEY}"
    assert find_secrets(text) == [Finding(3, "Private Key"), Finding(6, "AWS Access Key")]
    assert describe(find_secrets(text)) == "line 3: Private Key; line 6: AWS Access Key"


def test_a_message_names_the_first_findings_and_counts_the_rest() -> None:
    found = find_secrets("\n".join([SECRETS["AWS Access Key"]] * 12))
    assert len(found) == 12
    assert describe(found).endswith("; line 10: AWS Access Key; and 2 more")


def test_a_finding_never_holds_the_value() -> None:
    found = find_secrets(SECRETS["AWS Access Key"])
    assert found and all(AWS_KEY not in repr(f) and AWS_KEY not in f.says() for f in found)
    assert AWS_KEY not in skip_reason(found)


def test_crlf_and_blank_texts() -> None:
    assert find_secrets(f"a\r\nb {AWS_KEY}\r\n") == [Finding(2, "AWS Access Key")]
    assert find_secrets("") == [] and find_secrets("  \n\n") == []


def test_the_candidate_lines_miss_no_finding_of_a_line_by_line_scan() -> None:
    """The patterns searched over the whole text touch every line that detect-secrets flags when each
    line is scanned alone (the module docstring's argument, on every sample at a line's start, middle
    and end, and the line first, last and alone)."""
    from detect_secrets.core.scan import scan_line

    samples = [*SECRETS.values(), *NEAR_MISSES.values()]
    lines = [variant for s in samples for variant in (s, f"x {s}", f"{s} y", f'"{s}"')]
    text = "\n".join(["first", *lines, "last"])
    find_secrets(text)  # loads the scanner
    scanner = secrets_guard._scanner
    assert scanner is not None
    flagged = {n for n, line in enumerate(text.split("\n")) if list(scan_line(line))}
    assert flagged and flagged <= set(scanner.candidates(text))
    assert {f.line - 1 for f in find_secrets(text)} == flagged
    for line in lines:
        assert {f.line for f in find_secrets(line)} == ({1} if list(scan_line(line)) else set())


def test_every_key_word_of_the_keyword_detector_holds_a_stem() -> None:
    from detect_secrets.plugins.keyword import DENYLIST

    for word in DENYLIST:
        for spelled in (word.replace("_?", "_"), word.replace("_?", "")):
            assert any(stem in spelled.casefold() for stem in secrets_guard.KEY_WORD_STEMS), spelled


def test_a_text_whose_case_folding_grows_still_finds_a_keyword_line() -> None:
    """"ß" folds into "ss" (the offsets of the folded text drift): the stems are searched with a pattern."""
    text = f"- Straße 1\n{SECRETS['Secret Keyword']}\n- İstanbul"
    assert len(text.casefold()) != len(text)
    assert find_secrets(text) == [Finding(2, "Secret Keyword")]
    assert find_secrets(text.replace("api_key", "API_KEY")) == [Finding(2, "Secret Keyword")]


def test_the_skip_reason_opens_with_secret_and_has_its_metric_code() -> None:
    reason = skip_reason([Finding(3, "AWS Access Key"), Finding(5, "Private Key"), Finding(9, "Private Key")])
    assert reason == "secret: AWS Access Key (line 3), Private Key (lines 5, 9)"
    assert reason_code(reason) == "secret"


def test_refusing_names_detector_and_line_never_the_value() -> None:
    refuse_secrets("- tea at four\n", "content")
    with pytest.raises(InvalidArgument) as refused:
        refuse_secrets(f"# Keys\n{SECRETS['GitHub Token']}\n", "content")
    assert "content holds a secret (line 2: GitHub Token)" in refused.value.message
    assert "ghp_" not in refused.value.message


def test_the_detectors_named_are_the_plugins_detect_secrets_reports() -> None:
    from detect_secrets.settings import get_plugins

    find_secrets("x")
    assert {type(p).__name__: p.secret_type for p in get_plugins()} == DETECTORS


def test_scans_from_many_threads_agree() -> None:
    texts = [f"line\n{SECRETS[d]}" for d in sorted(SECRETS)] * 8
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(find_secrets, texts))
    assert [r[0].detector for r in results] == [d for d in sorted(SECRETS)] * 8


def test_importing_the_guard_loads_no_detect_secrets_until_a_scan() -> None:
    """And its loading leaves Python's warnings as they were (detect-secrets' logger turns on
    ``logging.captureWarnings``)."""
    code = (
        "import json, sys, warnings\nimport gateway.secrets_guard as g\nshown = warnings.showwarning\n"
        "before = 'detect_secrets' in sys.modules\ng.find_secrets('x = 1')\n"
        "print(json.dumps([before, 'detect_secrets' in sys.modules, warnings.showwarning is shown]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [False, True, True]

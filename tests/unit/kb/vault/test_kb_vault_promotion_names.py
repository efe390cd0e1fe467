"""The name a promoted fact gets: topic, reason, the editing-instruction fallback, the fact's own words."""

from __future__ import annotations

import random

import pytest

from services.kb.vault.names import validate_name
from services.kb.vault.promotion_names import (
    FACT,
    NAME_MAX_CHARS,
    REASON,
    TOPIC,
    Naming,
    choose_name,
    fact_name,
    is_edit_instruction,
    slugify,
)

FACT_TEXT = "- The staging host is named hermes and runs Debian 12."


def test_the_topic_names_the_fact_when_given() -> None:
    assert choose_name("staging-host", "learned it today", FACT_TEXT) == Naming("staging-host", TOPIC)


def test_a_topic_with_no_letter_or_digit_falls_back_to_the_reason() -> None:
    assert choose_name("--", "Staging host", FACT_TEXT) == Naming("staging-host", REASON)
    assert choose_name("-a--b-", "", FACT_TEXT).name == "a-b"


def test_the_reason_is_slugified_so_case_and_punctuation_do_not_split_a_fact() -> None:
    assert choose_name("", "Staging host's name!", FACT_TEXT) == Naming("staging-host-s-name", REASON)
    assert choose_name("", "  staging   HOST's name ", FACT_TEXT).name == "staging-host-s-name"


@pytest.mark.parametrize(
    "reason",
    [
        "insert after the cron section",
        "add to MEMORY.md under Tools",
        "update the line about X",
        "Please append this at the end of USER.md",
        "We should move it below the Tools heading",
        "put into memory/projects.md",
        "need to replace the bullet on backups",
        "Record next to the deploy notes",
        "let's add it to the top of the list",
        "Edit config.yaml accordingly",
    ],
)
def test_an_editing_instruction_is_passed_over_and_the_fact_names_the_note(reason: str) -> None:
    assert is_edit_instruction(reason)
    naming = choose_name("", reason, FACT_TEXT)
    assert naming == Naming("staging-host-named-hermes-runs-debian", FACT, " ".join(reason.split()))


@pytest.mark.parametrize(
    "reason",
    [
        "Add the staging host name",  # an edit verb but no anchor
        "Deploys after 5pm are banned",  # an anchor word but no edit verb first
        "User prefers tea",
        "Noted during the cron outage",  # "noted" is not the verb "note"
        "the line about X",  # a structure word, no verb
        "Staging section of the runbook",
        "",
    ],
)
def test_a_reason_that_is_not_an_instruction_stays_a_name(reason: str) -> None:
    assert not is_edit_instruction(reason)


def test_nothing_nameable_when_no_topic_an_instruction_and_no_significant_word() -> None:
    naming = choose_name("", "insert after the cron section", "- [x] ok, it is so")
    assert naming == Naming("", "", "insert after the cron section")
    assert choose_name("", "", "- ok?").name == ""
    assert choose_name("", "?!", "- a b c").name == ""  # a reason with no letter or digit is no name either


def test_a_reason_with_no_letter_or_digit_falls_back_to_the_fact() -> None:
    assert choose_name("", "→ …", FACT_TEXT) == Naming("staging-host-named-hermes-runs-debian", FACT)


def test_the_fact_name_is_its_leading_significant_words() -> None:
    assert fact_name("- The staging host is named hermes.") == "staging-host-named-hermes"
    # stopwords, words under 3 chars, repeats, markup and metadata markers are left out
    assert fact_name("<!-- importance: 4 -->\n## On it\n- **Backups**: the backups of DB 15 run at 02:00 in S3 (see [[ops]])") == (
        "backups-run-ops"
    )
    assert fact_name("---\ntitle: Ignored\n---\nPort 5433 serves Postgres for staging and QA today") == (
        "port-5433-serves-postgres-staging-today"
    )


def test_names_are_capped_at_whole_words() -> None:
    long_reason = "quarterly infrastructure planning meeting notes for the platform engineering organisation"
    slug = slugify(long_reason)
    assert len(slug) <= NAME_MAX_CHARS and long_reason.replace(" ", "-").startswith(slug)
    assert not slug.endswith("-")
    assert slugify("x" * 100) == "x" * NAME_MAX_CHARS


def test_names_are_capped_in_bytes_too_so_four_byte_letters_still_make_a_valid_name() -> None:
    """64 CJK extension B letters are 256 bytes: over the 200 a note name may have."""
    wide = "\U00020000" * 70
    assert slugify(wide) == "\U00020000" * 50 and validate_name(slugify(wide)) == slugify(wide)
    words = " ".join(["\U00020001" * 20] * 4)  # 20 letters (80 bytes) a word
    assert slugify(words) == "-".join(["\U00020001" * 20] * 2)  # a third would be 242 bytes
    assert slugify("x" + "\U00020000" * 70) == "x" + "\U00020000" * 49


def test_any_script_is_kept() -> None:
    assert slugify("Überprüfung der Server") == "überprüfung-der-server"
    assert fact_name("- 東京オフィス の Wi-Fi は 毎月 変わる") == "東京オフィス-毎月-変わる"  # two wide chars make a word


def test_every_slug_is_a_valid_note_name_and_never_a_retired_one() -> None:
    rng = random.Random(7)
    alphabet = "aZ9_-./\\[]|#^ \t\n.éß東→stale__"
    for _ in range(2000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 90)))
        slug = slugify(raw)
        if slug:
            assert validate_name(slug) == slug
            assert not slug.startswith("stale__")

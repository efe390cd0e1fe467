"""The reviewer's answer about one cluster, read strictly (docs/concepts/vault.md "Weekly reflection").

The reply is one JSON object, bare or inside Claude's ``--output-format json`` envelope (its
``result`` string; an ``"is_error": true`` envelope is a failure), found as the nightly reply is
(``review.reply``: the whole output when it is one JSON value, else its first balanced object):

- ``{"decision": "merge", "name": "…", "content": "…", "replaces": ["…", …], "reason": "…"}``
- ``{"decision": "leave", "reason": "…"}``

Anything else is a leave, with the reason saying what was wrong: another decision, a missing or
unknown key, a value of the wrong type, an empty name or content, a name that cannot be a note's,
content over ``MAX_CONTENT_BYTES``, fewer than two notes in ``replaces``, a repeat in it, or a note
in it that is not one of this cluster's (a note body telling the reviewer to merge everything can
change nothing beyond its cluster). The merged ``name`` is one of ``replaces`` or a new name not
taken by another note of the cluster.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from services.dreaming.review.reply import REASON_CAP, ReplyError, first_json_object, one_line

MERGE: Final = "merge"
LEAVE: Final = "leave"
MAX_CONTENT_BYTES: Final = 102_400  # the KB's cap on a merged note
MAX_NAME_CHARS: Final = 120
_KEYS: Final = {MERGE: {"decision", "name", "content", "replaces", "reason"}, LEAVE: {"decision", "reason"}}
_BAD_NAME: Final = re.compile(r"[/\\\x00-\x1f\x7f-\x9f\u2028\u2029\[\]|#^]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Decision:
    """``merge`` (name, content, replaces) or ``leave``; ``reason`` is the reviewer's own words for
    a valid reply (one line), or what was wrong with an invalid one (``valid`` false)."""

    decision: str
    reason: str
    name: str = ""
    content: str = ""
    replaces: tuple[str, ...] = ()
    valid: bool = True

    @property
    def merge(self) -> bool:
        return self.decision == MERGE


def _invalid(why: str) -> Decision:
    return Decision(LEAVE, f"the reviewer's reply was not used: {why}", valid=False)


def _envelope(stdout: str) -> dict[str, object]:
    """The reply object: the output's own, or the one in Claude's envelope. Raises ReplyError."""
    obj: object = None
    with contextlib.suppress(ValueError, RecursionError):
        obj = json.loads(stdout)
    if isinstance(obj, list):
        results = [e for e in obj if isinstance(e, dict) and e.get("type") == "result"]
        obj = results[-1] if results else None
    if not isinstance(obj, dict):
        obj = first_json_object(stdout)
    if obj.get("is_error") is True:
        result = obj.get("result")
        detail = f": {one_line(result)[:REASON_CAP]}" if isinstance(result, str) and result.strip() else ""
        raise ReplyError(f"the reviewer reported an error{detail}")
    if "decision" not in obj and isinstance(obj.get("result"), str):
        inner = first_json_object(str(obj["result"]))
        if "decision" not in inner and isinstance(inner.get("result"), str):
            raise ReplyError("an envelope inside the envelope")
        return inner
    return obj


def _name_problem(name: str) -> str:
    if not name.strip() or name != name.strip():
        return "name is empty or has surrounding spaces"
    if len(name) > MAX_NAME_CHARS:
        return f"name is over {MAX_NAME_CHARS} characters"
    if _BAD_NAME.search(name) or name.startswith(".") or name.startswith("stale__") or _SURROGATE.search(name):
        return "name cannot be a note's (no / \\ [ ] | # ^, control characters, leading '.' or stale__)"
    return ""


def parse_decision(stdout: str, cluster: Collection[str]) -> Decision:
    """The decision in the reviewer's ``stdout`` about the cluster of notes named ``cluster``
    (rules in the module docstring). Never raises: an unusable reply is an invalid leave."""
    if not stdout.strip():
        return _invalid("no output")
    try:
        obj = _envelope(stdout)
    except ReplyError as exc:
        return _invalid(str(exc))
    decision = obj.get("decision")
    if decision not in _KEYS:
        return _invalid(f"decision must be merge or leave (got {json.dumps(decision)[:40]})")
    keys = set(obj)
    extra, missing = sorted(keys - _KEYS[str(decision)]), sorted(_KEYS[str(decision)] - keys)
    if extra or missing:
        return _invalid("; ".join(filter(None, [f"unknown keys {', '.join(extra)[:80]}" if extra else "",
                                                f"missing keys {', '.join(missing)}" if missing else ""])))
    if not all(isinstance(obj[k], str) for k in keys - {"replaces"}):
        return _invalid("decision, name, content and reason must be strings")
    reason = one_line(str(obj["reason"]))[:REASON_CAP]
    if decision == LEAVE:
        return Decision(LEAVE, reason)
    name, content, replaces = str(obj["name"]), str(obj["content"]), obj["replaces"]
    if not isinstance(replaces, list) or not all(isinstance(r, str) for r in replaces):
        return _invalid("replaces must be a list of note names")
    problem = _name_problem(name)
    if problem:
        return _invalid(problem)
    if not content.strip():
        return _invalid("content is empty")
    if _SURROGATE.search(content) or len(content.encode("utf-8")) > MAX_CONTENT_BYTES:
        return _invalid(f"content is not valid Unicode or is over {MAX_CONTENT_BYTES:,} bytes")
    if len(replaces) < 2:
        return _invalid("replaces must name at least two notes of the cluster")
    if len(set(replaces)) != len(replaces):
        return _invalid("replaces names a note twice")
    outside = [r for r in replaces if r not in cluster]
    if outside:
        shown = ", ".join(json.dumps(r, ensure_ascii=False)[:60] for r in outside[:3])
        return _invalid(f"replaces names notes outside this cluster ({shown}{'…' if len(outside) > 3 else ''})")
    if name in cluster and name not in replaces:
        return _invalid(f"name {json.dumps(name, ensure_ascii=False)[:60]} is a note of the cluster it does not replace")
    return Decision(MERGE, reason, name=name, content=content, replaces=tuple(replaces))

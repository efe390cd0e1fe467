"""memory_search's answer (gateway_mcp.render): its fields are the KB proto's, shown as a model reads them."""

from __future__ import annotations

import pytest

from gateway.v1 import kb_pb2
from gateway_mcp.render import SearchHitOut, SearchOut, proto_fields, search_out, search_text

REPLY = kb_pb2.SearchResponse(
    hits=[
        kb_pb2.SearchHit(path="MEMORY.md", start_line=3, end_line=5, snippet="Deploys go through staging.",
                         score=1.4219, provenance="owner", importance=8, entry_hash="e1", corpus="memory"),
        kb_pb2.SearchHit(path="notes/ferry times.md", start_line=1, end_line=2, snippet="nine sharp", score=0.5),
    ],
    generation=7,
)


def test_the_models_hold_the_protos_fields_but_the_entry_hash() -> None:
    hit_fields = [field.name for field in kb_pb2.SearchHit.DESCRIPTOR.fields]
    assert list(SearchHitOut.model_fields) == [name for name in hit_fields if name != "entry_hash"]
    reply_fields = [field.name for field in kb_pb2.SearchResponse.DESCRIPTOR.fields]
    assert list(SearchOut.model_fields) == ["query", "corpus", *reply_fields]
    schema = SearchOut.model_json_schema()
    assert schema["$defs"]["SearchHitOut"]["properties"]["score"]["type"] == "number"
    assert schema["properties"]["generation"]["type"] == "integer"


def test_a_message_field_needs_its_model() -> None:
    with pytest.raises(KeyError):
        proto_fields(kb_pb2.SearchResponse.DESCRIPTOR)


def test_the_structured_content_fills_what_the_kb_left_empty() -> None:
    out = search_out("deploy", "all", REPLY)
    assert out["hits"][0] == {"path": "MEMORY.md", "start_line": 3, "end_line": 5,
                              "snippet": "Deploys go through staging.", "score": 1.4219, "provenance": "owner",
                              "importance": 8, "corpus": "memory"}
    assert (out["hits"][1]["provenance"], out["hits"][1]["corpus"]) == ("untrusted", "memory")
    assert (out["query"], out["corpus"], out["generation"], out["stale"], out["refreshed"]) == ("deploy", "all", 7,
                                                                                                 False, False)


def test_the_text_names_each_hit_and_the_index_freshness() -> None:
    shared = kb_pb2.SearchResponse(hits=[kb_pb2.SearchHit(path="notes/ferry times.md", start_line=1, end_line=2,
                                                          snippet="nine sharp", score=0.5, corpus="shared")],
                                   generation=3, stale=True)
    text = search_text("ferry", "all", shared)
    assert '1 hit for "ferry" in your memory and the shared vault:' in text
    assert "1. [shared] notes/ferry times.md:1-2 (score 0.50, untrusted, importance 0)" in text
    assert 'memory_shared_get(name)' in text and '"ferry times"' in text
    assert text.endswith("Pass refresh=true to re-index before searching.")
    assert search_text("x", "memory", kb_pb2.SearchResponse()).startswith('No hits for "x" in your memory.')

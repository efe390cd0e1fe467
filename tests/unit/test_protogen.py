"""The committed generated code matches protos/ (regenerate with `make protos`)."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2

from gateway_cli.protogen import DESCRIPTOR_SET, REPO_ROOT, generate, proto_files
from gateway_http.descriptors import proto_modules
from gateway_http.proto_docs import load_descriptor_set

GENERATED = (".py", ".pyi", ".binpb")


def test_generated_code_has_not_drifted(tmp_path: Path) -> None:
    generate(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in (tmp_path / "gateway" / "v1").iterdir())
    committed_dir = REPO_ROOT / "gateway" / "v1"
    committed = sorted(p.relative_to(REPO_ROOT) for p in committed_dir.iterdir() if p.name != "__init__.py" and p.suffix in GENERATED)
    assert fresh == committed, "generated files differ from the committed set: run `make protos`"
    for rel in fresh:
        assert (tmp_path / rel).read_bytes() == (REPO_ROOT / rel).read_bytes(), f"{rel} drifted from protos/: run `make protos`"
    assert len(proto_files()) >= 2
    assert DESCRIPTOR_SET in fresh


def _without_json_names(messages: object) -> None:
    """Clear ``json_name`` (protoc's Python output leaves the default out; a descriptor set spells it)."""
    for message in messages:  # type: ignore[attr-defined]
        for field in [*message.field, *message.extension]:
            field.ClearField("json_name")
        _without_json_names(message.nested_type)


def test_the_descriptor_set_is_the_generated_modules_plus_their_comments() -> None:
    """One generated home: without its source info, each file of the set is the descriptor a
    ``_pb2`` module was generated with, and every proto has comments in it."""
    modules = {m.DESCRIPTOR.name: m.DESCRIPTOR.serialized_pb for m in proto_modules()}
    files = {f.name: f for f in load_descriptor_set().file}  # read once the modules (and their options) are imported
    assert set(files) == set(modules) == {f"gateway/v1/{p.name}" for p in proto_files()}
    for name, proto in files.items():
        assert proto.source_code_info.location, f"{name} has no source info"
        bare = descriptor_pb2.FileDescriptorProto()
        bare.CopyFrom(proto)
        bare.ClearField("source_code_info")
        generated = descriptor_pb2.FileDescriptorProto.FromString(modules[name])
        for file in (bare, generated):
            _without_json_names(file.message_type)
            for extension in file.extension:
                extension.ClearField("json_name")
        assert bare == generated, name

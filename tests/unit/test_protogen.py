"""The committed generated code matches protos/ (regenerate with `make protos`)."""

from __future__ import annotations

from pathlib import Path

from gateway.protogen import REPO_ROOT, generate, proto_files


def test_generated_code_has_not_drifted(tmp_path: Path) -> None:
    generate(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in (tmp_path / "gateway" / "v1").iterdir())
    committed_dir = REPO_ROOT / "gateway" / "v1"
    committed = sorted(p.relative_to(REPO_ROOT) for p in committed_dir.iterdir() if p.name != "__init__.py" and p.suffix in (".py", ".pyi"))
    assert fresh == committed, "generated files differ from the committed set: run `make protos`"
    for rel in fresh:
        assert (tmp_path / rel).read_bytes() == (REPO_ROOT / rel).read_bytes(), f"{rel} drifted from protos/: run `make protos`"
    assert len(proto_files()) >= 2

"""Generate the Python code for ``protos/`` into the ``gateway.v1`` package.

Run ``python -m gateway_cli.protogen`` after editing a ``.proto`` file. It writes,
all from the one protoc run, the ``*_pb2`` modules and stubs and
``gateway/v1/descriptors.binpb``: a ``FileDescriptorSet`` of the suite's protos
*with* their source info (comments), which the generated modules lack and the
OpenAPI document reads (``gateway_http.openapi``). Everything generated is
committed; ``tests/unit/test_protogen.py`` fails when any of it drifts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grpc_tools
from google.api import annotations_pb2
from grpc_tools import protoc

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO_ROOT / "protos"
DESCRIPTOR_SET = Path("gateway") / "v1" / "descriptors.binpb"  # relative to the output root


def proto_files() -> list[Path]:
    """Every ``.proto`` file of the suite, sorted."""
    return sorted(PROTO_ROOT.glob("gateway/v1/*.proto"))


def generate(out_dir: Path) -> None:
    """Write ``*_pb2.py``, ``*_pb2.pyi``, ``*_pb2_grpc.py`` and ``descriptors.binpb`` under ``out_dir``.

    Raises RuntimeError when protoc reports an error.
    """
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    googleapis = Path(annotations_pb2.__file__).parent.parent.parent
    (out_dir / DESCRIPTOR_SET).parent.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{googleapis}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--descriptor_set_out={out_dir / DESCRIPTOR_SET}",
        "--include_source_info",
        *(str(p.relative_to(PROTO_ROOT)) for p in proto_files()),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed; see its output above")


def main() -> int:
    generate(REPO_ROOT)
    print(f"generated {len(proto_files())} proto file(s) into gateway/v1/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

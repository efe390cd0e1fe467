"""The subset of kustomize that deploy/kubernetes/ uses, so its tests render it without a binary.

A kustomization here has ``resources`` (YAML files, or folders holding a kustomization) and
``patches`` (a JSON 6902 patch file applied to the one resource its ``target`` names by kind and
name). Any other field is refused, so that a manifest using more of kustomize fails here rather
than being rendered wrong; tests/unit/test_kubernetes_manifests.py compares this renderer's
output with ``kubectl kustomize`` wherever kubectl is installed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Resource = dict[str, Any]
KNOWN_FIELDS = {"apiVersion", "kind", "resources", "patches"}
KUSTOMIZATION = "kustomization.yaml"


class RenderError(Exception):
    """The kustomization uses what this renderer does not do, or a patch does not apply."""


def render(folder: Path) -> list[Resource]:
    """Every resource of the kustomization in ``folder``, its patches applied, in file order."""
    spec = yaml.safe_load((folder / KUSTOMIZATION).read_text(encoding="utf-8"))
    unknown = set(spec) - KNOWN_FIELDS
    if unknown:
        raise RenderError(f"{folder / KUSTOMIZATION}: {sorted(unknown)} is not rendered by tests/kustomize_render.py")
    resources: list[Resource] = []
    for entry in spec.get("resources", []):
        path = (folder / entry).resolve()
        if path.is_dir():
            resources += render(path)
        else:
            resources += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    for patch in spec.get("patches", []):
        _apply_patch(folder, patch, resources)
    return resources


def _apply_patch(folder: Path, patch: dict[str, Any], resources: list[Resource]) -> None:
    target = patch.get("target") or {}
    if set(patch) != {"path", "target"} or set(target) != {"kind", "name"}:
        raise RenderError(f"{folder / KUSTOMIZATION}: a patch needs exactly path and target (kind, name): {patch}")
    matches = [i for i, r in enumerate(resources) if r["kind"] == target["kind"] and r["metadata"]["name"] == target["name"]]
    if len(matches) != 1:
        raise RenderError(f"{folder / KUSTOMIZATION}: patch target {target} matches {len(matches)} resources")
    operations = yaml.safe_load((folder / patch["path"]).read_text(encoding="utf-8"))
    doc = copy.deepcopy(resources[matches[0]])
    for operation in operations:
        doc = apply_operation(doc, operation)
    resources[matches[0]] = doc


def apply_operation(doc: Any, operation: dict[str, Any]) -> Any:
    """``doc`` after one JSON 6902 ``add``, ``replace`` or ``remove`` (RFC 6902), changed in place."""
    op, keys = operation["op"], _pointer(operation["path"])
    if not keys:
        raise RenderError(f"{op} of the whole document is not supported")
    parent = doc
    for key in keys[:-1]:
        parent = parent[int(key)] if isinstance(parent, list) else parent[key]
    last = keys[-1]
    if op not in ("add", "replace", "remove"):
        raise RenderError(f"JSON patch op {op!r} is not supported")
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if op == "add":
            parent.insert(index, operation["value"])
        elif op == "replace":
            parent[index] = operation["value"]
        else:
            del parent[index]
    elif op in ("replace", "remove") and last not in parent:
        raise RenderError(f"{op} {operation['path']}: no such member")
    elif op == "remove":
        del parent[last]
    else:
        parent[last] = operation["value"]
    return doc


def _pointer(path: str) -> list[str]:
    if path and not path.startswith("/"):
        raise RenderError(f"{path!r} is not a JSON pointer")
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]

"""deploy/kubernetes/, rendered offline, is valid against the Kubernetes schemas of a pinned version.

The base and every example overlay are rendered by tests/kustomize_render.py and each resource is
validated, strictly (no unknown field), by kubernetes-validate against its bundled schemas of
Kubernetes KUBERNETES_VERSION. Custom resources have no schema there: the only one allowed is
CloudNativePG's ``Cluster`` of examples/cloudnativepg, checked here by hand. Where ``kubectl`` is
installed, its ``kustomize`` renders the same folders and must agree with our renderer.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kustomize_render import RenderError, apply_operation, render

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes the manifests are written for (endPort, PVC retention, exec probe timeouts).
KUBERNETES_VERSION = "1.30.0"
KUSTOMIZATIONS = ("base", "examples/external-postgres", "examples/cloudnativepg")
# apiVersion, kind of the custom resources allowed, and why kubernetes-validate cannot check them.
CUSTOM_RESOURCES = {
    ("postgresql.cnpg.io/v1", "Cluster"): "CloudNativePG's CRD: not in Kubernetes' schemas; checked by hand below",
}


def _is_custom(resource: dict[str, Any]) -> bool:
    return (resource["apiVersion"], resource["kind"]) in CUSTOM_RESOURCES


@pytest.mark.parametrize("folder", KUSTOMIZATIONS)
def test_every_resource_is_valid_for_the_pinned_kubernetes(folder: str) -> None:
    resources = render(DEPLOY / folder)
    assert resources
    problems = []
    for resource in resources:
        if _is_custom(resource):
            continue
        try:
            kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
            problems.append(f"{resource['kind']}/{resource['metadata']['name']}: {exc}")
    assert problems == []


def test_only_the_example_overlay_has_a_custom_resource() -> None:
    found = {folder: sorted((r["apiVersion"], r["kind"]) for r in render(DEPLOY / folder) if _is_custom(r)) for folder in KUSTOMIZATIONS}
    assert found == {"base": [], "examples/external-postgres": [], "examples/cloudnativepg": [("postgresql.cnpg.io/v1", "Cluster")]}


def test_the_validator_catches_a_field_that_does_not_exist() -> None:
    statefulset = next(r for r in render(DEPLOY / "base") if r["kind"] == "StatefulSet")
    statefulset["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(statefulset, KUBERNETES_VERSION, strict=True)


def test_the_cloudnativepg_cluster_is_what_the_hosts_read() -> None:
    resources = render(DEPLOY / "examples/cloudnativepg")
    cluster = next(r for r in resources if r["kind"] == "Cluster")
    name = cluster["metadata"]["name"]
    assert cluster["spec"]["instances"] >= 2 and cluster["spec"]["storage"]["size"]
    assert "CREATE EXTENSION IF NOT EXISTS pg_trgm" in cluster["spec"]["bootstrap"]["initdb"]["postInitApplicationSQL"]
    statefulset = next(r for r in resources if r["kind"] == "StatefulSet")
    volume = next(v for v in statefulset["spec"]["template"]["spec"]["volumes"] if v["name"] == "postgres")
    secrets = {s["secret"]["name"]: s["secret"]["items"] for s in volume["projected"]["sources"]}
    assert secrets == {f"{name}-app": [{"key": "uri", "path": "dsn"}], f"{name}-ca": [{"key": "ca.crt", "path": "ca.crt"}]}
    policy = next(r for r in resources if r["kind"] == "NetworkPolicy")
    database = next(rule for rule in policy["spec"]["egress"] if {"port": 5432, "protocol": "TCP"} in rule["ports"])
    assert database["to"] == [{"podSelector": {"matchLabels": {"cnpg.io/cluster": name}}}]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed: only our renderer renders")
@pytest.mark.parametrize("folder", KUSTOMIZATIONS)
def test_kubectl_kustomize_renders_the_same(folder: str) -> None:
    result = subprocess.run(["kubectl", "kustomize", str(DEPLOY / folder)], capture_output=True, text=True, timeout=60, check=True)
    theirs = {(r["kind"], r["metadata"]["name"]): r for r in yaml.safe_load_all(result.stdout) if r}
    ours = {(r["kind"], r["metadata"]["name"]): r for r in render(DEPLOY / folder)}
    assert theirs == ours


def test_the_renderer_refuses_what_it_does_not_do(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n", encoding="utf-8")
    with pytest.raises(RenderError, match="namePrefix"):
        render(tmp_path)


def test_a_patch_of_a_missing_member_fails() -> None:
    doc = {"spec": {"egress": [{"ports": []}]}}
    assert apply_operation(doc, {"op": "add", "path": "/spec/egress/0/to", "value": []}) == {"spec": {"egress": [{"ports": [], "to": []}]}}
    with pytest.raises(RenderError, match="no such member"):
        apply_operation(doc, {"op": "replace", "path": "/spec/ingress", "value": []})
    with pytest.raises(IndexError):
        apply_operation(doc, {"op": "replace", "path": "/spec/egress/3", "value": {}})

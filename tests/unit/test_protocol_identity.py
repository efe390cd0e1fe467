"""The suite's version (MCP ``serverInfo``) and the ``grpc.reflection.v1`` file built from ``v1alpha``."""

from __future__ import annotations

from importlib import metadata

import pytest

from gateway import reflection, version


def test_the_version_is_the_installed_distributions_or_a_pep440_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    version.package_version.cache_clear()
    assert version.package_version() == metadata.version("claude-gateway")

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(version.metadata, "version", missing)
    version.package_version.cache_clear()
    try:
        assert version.package_version() == "0+unknown"
    finally:
        monkeypatch.undo()
        version.package_version.cache_clear()


def test_the_v1_reflection_file_is_v1alpha_under_the_v1_package() -> None:
    proto = reflection.v1_file()
    assert (proto.name, proto.package) == ("grpc/reflection/v1/reflection.proto", "grpc.reflection.v1")
    [service] = proto.service
    [method] = service.method
    assert (service.name, method.name) == ("ServerReflection", "ServerReflectionInfo")
    assert method.client_streaming and method.server_streaming
    assert method.input_type == ".grpc.reflection.v1.ServerReflectionRequest"
    names = [f.type_name for m in proto.message_type for f in m.field if f.type_name]
    assert names and all(n.startswith(".grpc.reflection.v1.") for n in names), names

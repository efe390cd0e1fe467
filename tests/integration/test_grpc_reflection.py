"""Server reflection on every gRPC process, under ``grpc.reflection.v1`` (what grpcurl asks first) and ``v1alpha``.

The client here is a plain gRPC stream on the service's method path, not the gateway's own code:
the request and answer messages of ``v1`` and ``v1alpha`` are the same bytes, so grpcio-reflection's
message classes encode them. On each process it lists the services and resolves the file
descriptor of the process's own service and of reflection itself (``grpcurl describe``), and
the answer must parse as a FileDescriptorProto that declares that service.
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2
from suite_support import Suite

pytestmark = pytest.mark.integration

SERVICES = {
    "file_api": "gateway.v1.WorkspaceFiles",
    "watcher": "gateway.v1.Sessions",
    "kb": "gateway.v1.Knowledge",
    "dreaming": "gateway.v1.Dreaming",
}
PACKAGES = ("grpc.reflection.v1", "grpc.reflection.v1alpha")


def ask(address: str, package: str, *requests: reflection_pb2.ServerReflectionRequest) -> list[reflection_pb2.ServerReflectionResponse]:
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            f"/{package}.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        return list(call(iter(requests), timeout=10))


def declared_services(response: reflection_pb2.ServerReflectionResponse) -> set[str]:
    assert response.WhichOneof("message_response") == "file_descriptor_response", response
    out = set()
    for raw in response.file_descriptor_response.file_descriptor_proto:
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
        out.update(f"{proto.package}.{service.name}" for service in proto.service)
    return out


@pytest.mark.parametrize("package", PACKAGES)
@pytest.mark.parametrize("process", sorted(SERVICES))
def test_reflection_lists_and_describes_on_every_process(suite: Suite, process: str, package: str) -> None:
    own = SERVICES[process]
    listed, own_file, reflection_file = ask(
        suite.address(process),
        package,
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=own),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=f"{package}.ServerReflection"),
    )
    names = {service.name for service in listed.list_services_response.service}
    assert {own, "grpc.health.v1.Health", *(f"{p}.ServerReflection" for p in PACKAGES)} <= names, names
    assert own in declared_services(own_file)
    assert f"{package}.ServerReflection" in declared_services(reflection_file)

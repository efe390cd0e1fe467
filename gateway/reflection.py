"""gRPC server reflection under both of its names: ``grpc.reflection.v1`` and ``grpc.reflection.v1alpha``.

grpcurl and current gRPC clients ask for ``grpc.reflection.v1`` first; older ones only know
``v1alpha``. grpcio-reflection ships the ``v1alpha`` service only, and the two protocols are
the same messages with the same field numbers under another package name. So one servicer
answers both: the ``v1`` method is registered with the ``v1alpha`` message classes (the bytes
on the wire are identical), and the ``v1`` file is added to the default descriptor pool, built
from the ``v1alpha`` descriptor with the package renamed, so a client that asks reflection
about reflection itself (``grpcurl describe``) gets its ``v1`` answer too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1ALPHA_PACKAGE: Final = "grpc.reflection.v1alpha"
V1_PACKAGE: Final = "grpc.reflection.v1"
V1_FILE: Final = "grpc/reflection/v1/reflection.proto"
V1ALPHA_SERVICE: Final[str] = reflection.SERVICE_NAME
V1_SERVICE: Final = f"{V1_PACKAGE}.ServerReflection"
SERVICE_NAMES: Final = (V1_SERVICE, V1ALPHA_SERVICE)


def _renamed(type_name: str) -> str:
    prefix = f".{V1ALPHA_PACKAGE}."
    return f".{V1_PACKAGE}.{type_name[len(prefix):]}" if type_name.startswith(prefix) else type_name


def v1_file() -> descriptor_pb2.FileDescriptorProto:
    """The ``grpc.reflection.v1`` file: the ``v1alpha`` one under the ``v1`` package and path."""
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = V1_FILE
    proto.package = V1_PACKAGE
    proto.ClearField("options")  # the v1alpha file's language options name v1alpha packages
    for message in proto.message_type:
        for field in message.field:
            if field.type_name:
                field.type_name = _renamed(field.type_name)
    for service in proto.service:
        for method in service.method:
            method.input_type = _renamed(method.input_type)
            method.output_type = _renamed(method.output_type)
    return proto


def _add_v1_file(pool: descriptor_pool.DescriptorPool) -> None:
    try:
        pool.FindFileByName(V1_FILE)
    except KeyError:
        pool.AddSerializedFile(v1_file().SerializeToString())


def enable(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Serve reflection of ``service_names`` (and of reflection itself, both names) on ``server``."""
    _add_v1_file(descriptor_pool.Default())
    servicer = reflection.aio.ReflectionServicer([*service_names, *SERVICE_NAMES])
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(V1_SERVICE, {"ServerReflectionInfo": v1}),))

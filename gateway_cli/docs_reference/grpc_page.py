"""docs/reference/grpc.md: every service, RPC, message and enum of the suite's protos.

Read from the descriptors of the generated ``gateway.v1`` modules (what the servers serve)
and the comments of the committed descriptor set (``gateway_http.proto_docs``), the same
sources as the REST shim's routes and ``/openapi.json``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from google.api import field_behavior_pb2
from google.protobuf import descriptor

from gateway.v1 import options_pb2
from gateway_cli.docs_reference.access import rpc_access
from gateway_cli.docs_reference.markdown import code, heading, page, paragraphs, prose, slug, table
from gateway_http.descriptors import Route, all_routes, proto_modules
from gateway_http.openapi import openapi_path
from gateway_http.proto_docs import comments

FD = descriptor.FieldDescriptor
PACKAGE = "gateway.v1"

_TYPE_NAMES = {value: name.removeprefix("TYPE_").lower() for name, value in vars(FD).items()
               if name.startswith("TYPE_") and isinstance(value, int)}


def services() -> list[descriptor.ServiceDescriptor]:
    """Every service of the suite, by name."""
    found = [s for module in proto_modules() for s in module.DESCRIPTOR.services_by_name.values()]
    return sorted(found, key=lambda s: s.name)


def _nested(message: descriptor.Descriptor) -> Iterator[descriptor.Descriptor]:
    yield message
    for inner in message.nested_types:
        if not inner.GetOptions().map_entry:
            yield from _nested(inner)


def messages() -> list[descriptor.Descriptor]:
    """Every message of the package, nested ones included (map entries are not messages of their own), by name."""
    found = [m for module in proto_modules() for top in module.DESCRIPTOR.message_types_by_name.values()
             for m in _nested(top)]
    return sorted(found, key=lambda m: m.full_name)


def enums() -> list[descriptor.EnumDescriptor]:
    """Every enum of the package, nested ones included, by name."""
    found = [e for module in proto_modules() for e in module.DESCRIPTOR.enum_types_by_name.values()]
    found += [e for m in messages() for e in m.enum_types]
    return sorted(found, key=lambda e: e.full_name)


def short(full_name: str) -> str:
    """A name as the page writes it: without the package (``Session``, ``Directive.Kind``)."""
    return full_name.removeprefix(PACKAGE + ".")


def rpc_anchor(method: descriptor.MethodDescriptor) -> str:
    """The anchor of an RPC on this page."""
    return slug("rpc", method.containing_service.name, method.name)


def route_anchor(method: descriptor.MethodDescriptor) -> str:
    """The anchor of an RPC's route on the REST page."""
    return slug(method.containing_service.name, method.name)


def message_anchor(full_name: str) -> str:
    return slug("message", short(full_name))


def enum_anchor(full_name: str) -> str:
    return slug("enum", short(full_name))


def type_link(full_name: str, prefix: str = "") -> str:
    """A link to a message or enum of the package on this page (``prefix``: the page's path from
    another page); a type from elsewhere (``google.protobuf.*``) is named, not linked."""
    if not full_name.startswith(PACKAGE + "."):
        return code(full_name)
    anchor = enum_anchor(full_name) if _is_enum(full_name) else message_anchor(full_name)
    return f"[{code(short(full_name))}]({prefix}#{anchor})"


@cache
def _is_enum(full_name: str) -> bool:
    return any(e.full_name == full_name for e in enums())


def field_type(field: descriptor.FieldDescriptor, prefix: str = "") -> str:
    """The field's type as the page shows it: a scalar's proto name, or a link to its message or enum."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return f"map of {field_type(key, prefix)} to {field_type(value, prefix)}"
    if field.type == FD.TYPE_MESSAGE:
        shown = type_link(field.message_type.full_name, prefix)
    elif field.type == FD.TYPE_ENUM:
        shown = type_link(field.enum_type.full_name, prefix)
    else:
        shown = code(_TYPE_NAMES[field.type])
    return f"repeated {shown}" if field.is_repeated else shown


def required(field: descriptor.FieldDescriptor) -> bool:
    """Whether the proto marks ``field`` REQUIRED (google.api.field_behavior)."""
    return field_behavior_pb2.REQUIRED in field.GetOptions().Extensions[field_behavior_pb2.field_behavior]


def about(full_name: str) -> str:
    """The comment of a proto element, its paragraphs joined on one line ("" when it has none)."""
    return " ".join(comments().get(full_name, []))


def _routes_by_method() -> dict[str, list[Route]]:
    out: dict[str, list[Route]] = {}
    for route in all_routes():
        out.setdefault(route.method.full_name, []).append(route)
    return out


def _service(service: descriptor.ServiceDescriptor, routes: dict[str, list[Route]]) -> list[str]:
    backend = service.GetOptions().Extensions[options_pb2.backend]
    lines = heading(2, f"{service.name}", slug("service", service.name))
    lines += [f"Full name {code(service.full_name)}, served by the {code(backend)} process "
              f"(defined in {code(service.file.name)}).", ""]
    lines += paragraphs(comments().get(service.full_name, []))
    for method in service.methods:
        lines += heading(3, f"{service.name}.{method.name}", rpc_anchor(method))
        request = ("stream " if method.client_streaming else "") + type_link(method.input_type.full_name)
        reply = ("stream " if method.server_streaming else "") + type_link(method.output_type.full_name)
        lines += [f"{request} → {reply}", ""]
        lines += paragraphs(comments().get(method.full_name, []))
        rest = [f"[{code(r.http_method + ' ' + openapi_path(r))}](rest.md#{route_anchor(method)})"
                for r in routes.get(method.full_name, [])]
        lines += [f"- **Access**: {rpc_access(method)}",
                  f"- **REST**: {', '.join(rest) if rest else 'none (gRPC only)'}", ""]
    return lines


def _message(message: descriptor.Descriptor) -> list[str]:
    lines = heading(3, short(message.full_name), message_anchor(message.full_name))
    lines += paragraphs(comments().get(message.full_name, []))
    if not message.fields:
        return [*lines, "No fields.", ""]
    rows = []
    for field in sorted(message.fields, key=lambda f: f.number):
        notes = [prose(about(field.full_name))]
        if required(field):
            notes.insert(0, "**Required.**")
        if field.containing_oneof is not None and not field.containing_oneof.name.startswith("_"):
            notes.insert(0, f"One of {code(field.containing_oneof.name)}.")
        rows.append((str(field.number), code(field.name), code(field.json_name), field_type(field), " ".join(n for n in notes if n)))
    return lines + table(("#", "field", "JSON", "type", "description"), rows)


def _enum(enum: descriptor.EnumDescriptor) -> list[str]:
    lines = heading(3, short(enum.full_name), enum_anchor(enum.full_name))
    lines += paragraphs(comments().get(enum.full_name, []))
    rows = [(str(v.number), code(v.name), prose(about(f"{enum.full_name}.{v.name}"))) for v in enum.values]
    return lines + table(("#", "value", "description"), rows)


def render() -> str:
    """The whole page."""
    routes = _routes_by_method()
    intro = [
        f"The suite's gRPC services (package {code(PACKAGE)}), read from the descriptors the servers are built from. "
        "Every call presents an API key (metadata `x-api-key`, or `authorization: Bearer KEY`) whose scope covers "
        "the call's `agent_id`; **Access** says whether a read-only key may make it. The suite's own processes "
        "present the home's internal token instead. Services answer the standard health check "
        "(`grpc.health.v1.Health`) and server reflection.",
        "",
        "| service | process | RPCs |",
        "|---|---|---|",
        *[f"| [{s.name}](#{slug('service', s.name)}) | {code(s.GetOptions().Extensions[options_pb2.backend])} "
          f"| {len(s.methods)} |" for s in services()],
    ]
    body: list[str] = []
    for service in services():
        body += _service(service, routes)
    body += heading(2, "Messages", "messages")
    for message in messages():
        body += _message(message)
    body += heading(2, "Enums", "enums")
    for enum in enums():
        body += _enum(enum)
    return page("gRPC API", "the `.proto` files in `protos/gateway/v1/` (their descriptors and comments)", intro, body)

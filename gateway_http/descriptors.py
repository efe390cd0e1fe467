"""The suite's services as the shim sees them: every RPC with a google.api.http rule.

Routes come from the descriptors of the generated ``gateway.v1`` modules, so
an annotated RPC is on REST with no shim code.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from google.api import annotations_pb2
from google.protobuf import descriptor, message_factory

import gateway.v1
from gateway.v1 import options_pb2

_VARIABLE = re.compile(r"^\{([a-z_][a-z0-9_.]*)(?:=(\*\*?))?\}(?::([A-Za-z][A-Za-z0-9_-]*))?$")


class RouteError(ValueError):
    """An http rule the shim cannot serve (a bug in a .proto file)."""


@dataclass(frozen=True)
class Segment:
    literal: str | None  # a literal segment, or None for a variable
    field: str | None = None
    rest: bool = False  # {field=**}: matches the remaining segments
    verb: str | None = None  # {field}:verb, grpc-gateway's custom-method suffix (last segment only)


@dataclass(frozen=True)
class Route:
    http_method: str
    template: str
    segments: tuple[Segment, ...]
    body: str  # "" (none), "*" (whole body) or a field name
    method: descriptor.MethodDescriptor
    backend: str
    request_class: Any
    response_class: Any

    @property
    def grpc_path(self) -> str:
        return f"/{self.method.containing_service.full_name}/{self.method.name}"

    @property
    def path_fields(self) -> tuple[str, ...]:
        return tuple(s.field for s in self.segments if s.field)


def _parse_template(template: str) -> tuple[Segment, ...]:
    if not template.startswith("/"):
        raise RouteError(f"path template {template!r} must start with /")
    out = []
    parts = template[1:].split("/")
    for i, part in enumerate(parts):
        match = _VARIABLE.match(part)
        if match:
            rest = match.group(2) == "**"
            verb = match.group(3)
            if (rest or verb) and i != len(parts) - 1:
                raise RouteError(f"{template!r}: ** and :verb only in the last segment")
            if rest and verb:
                raise RouteError(f"{template!r}: ** cannot take a :verb")
            out.append(Segment(literal=None, field=match.group(1), rest=rest, verb=verb))
        elif "{" in part or "}" in part or not part:
            raise RouteError(f"{template!r}: unsupported segment {part!r}")
        else:
            out.append(Segment(literal=part))
    return tuple(out)


def _rule_pattern(rule: Any) -> tuple[str, str]:
    kind = rule.WhichOneof("pattern")
    if kind is None:
        raise RouteError("http rule without a pattern")
    if kind == "custom":
        return rule.custom.kind.upper(), rule.custom.path
    return kind.upper(), getattr(rule, kind)


def _routes_of(method: descriptor.MethodDescriptor, backend: str) -> list[Route]:
    options = method.GetOptions()
    if not options.HasExtension(annotations_pb2.http):
        return []
    top = options.Extensions[annotations_pb2.http]
    routes = []
    for rule in [top, *top.additional_bindings]:
        http_method, template = _rule_pattern(rule)
        segments = _parse_template(template)
        for seg in segments:
            if seg.field and seg.field not in method.input_type.fields_by_name:
                raise RouteError(f"{method.full_name}: {template!r} names unknown field {seg.field!r}")
        routes.append(
            Route(
                http_method=http_method,
                template=template,
                segments=segments,
                body=rule.body,
                method=method,
                backend=backend,
                request_class=message_factory.GetMessageClass(method.input_type),
                response_class=message_factory.GetMessageClass(method.output_type),
            )
        )
    return routes


def proto_modules() -> list[Any]:
    """Every generated ``*_pb2`` module of gateway.v1, imported."""
    names = sorted(m.name for m in pkgutil.iter_modules(gateway.v1.__path__) if m.name.endswith("_pb2"))
    return [importlib.import_module(f"gateway.v1.{name}") for name in names]


@cache
def all_routes() -> tuple[Route, ...]:
    """Every REST route of the suite, from the annotations in the descriptors."""
    routes: list[Route] = []
    for module in proto_modules():
        for service in module.DESCRIPTOR.services_by_name.values():
            backend = service.GetOptions().Extensions[options_pb2.backend]
            if not backend:
                raise RouteError(f"service {service.full_name} has no (gateway.v1.backend) option")
            for method in service.methods:
                if method.client_streaming or method.server_streaming:
                    continue  # REST maps unary calls only
                routes.extend(_routes_of(method, backend))
    return tuple(routes)

"""The access each RPC asks of its caller's key: read, or write.

The protos do not say it; the servicers do, in the one place that enforces it: the first call
of a servicer method to a helper of its own class that takes ``write`` (``_check``,
``_agent``, ``_workspace``…), which hands it to ``gateway.rpc.authorize_call``. This module
reads that call from the method's source, with the helper's own default when the call leaves
``write`` out, so the reference shows what the code enforces. A method whose access cannot be
read that way raises AccessUnknown: the reference is then fixed, never guessed.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from functools import cache
from typing import Any

from google.protobuf import descriptor

from gateway.v1 import options_pb2

READ = "read"
WRITE = "write"


class AccessUnknown(LookupError):
    """The servicer method of an RPC has no access check this module can read."""


def servicer_class(service: descriptor.ServiceDescriptor) -> type[Any]:
    """The class that implements ``service``: in ``services.<backend>.servicer``, a subclass of
    the generated ``<Service>Servicer`` base."""
    backend = service.GetOptions().Extensions[options_pb2.backend]
    module = importlib.import_module(f"services.{backend}.servicer")
    stem = service.file.name.rsplit("/", 1)[-1].removesuffix(".proto")
    base = getattr(importlib.import_module(f"gateway.v1.{stem}_pb2_grpc"), f"{service.name}Servicer")
    found = [value for value in vars(module).values()
             if isinstance(value, type) and value is not base and issubclass(value, base)]
    if len(found) != 1:
        raise AccessUnknown(f"{module.__name__} has {len(found)} implementations of {service.full_name}")
    return found[0]


def _self_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls of ``self.<name>(...)`` in ``tree``, in source order."""
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"]
    return sorted(calls, key=lambda call: (call.lineno, call.col_offset))


def _write_of(cls: type[Any], call: ast.Call) -> bool | None:
    """The ``write`` that ``call`` passes to a helper of ``cls``; None when the helper takes no ``write``."""
    if not isinstance(call.func, ast.Attribute):
        return None
    helper = getattr(cls, call.func.attr, None)
    if not callable(helper):
        return None
    parameter = inspect.signature(helper).parameters.get("write")
    if parameter is None:
        return None
    for keyword in call.keywords:
        if keyword.arg == "write":
            if isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, bool):
                return keyword.value.value
            raise AccessUnknown(f"{cls.__name__}.{call.func.attr}: write={ast.unparse(keyword.value)} is not a constant")
    if isinstance(parameter.default, bool):
        return parameter.default
    raise AccessUnknown(f"{cls.__name__}.{call.func.attr} is called without write and has no default")


def method_access(cls: type[Any], name: str) -> str:
    """``READ`` or ``WRITE``: what method ``name`` of servicer class ``cls`` checks the caller's key for.

    Raises AccessUnknown when the method makes no such check, or passes a ``write`` that is not a constant.
    """
    function = inspect.unwrap(getattr(cls, name))
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for call in _self_calls(tree):
        write = _write_of(cls, call)
        if write is not None:
            return WRITE if write else READ
    raise AccessUnknown(f"{cls.__name__}.{name} calls no access check of its class (a helper taking write)")


@cache
def rpc_access(method: descriptor.MethodDescriptor) -> str:
    """``READ`` or ``WRITE``: the access the servicer method of ``method`` checks the caller's key for."""
    return method_access(servicer_class(method.containing_service), method.name)

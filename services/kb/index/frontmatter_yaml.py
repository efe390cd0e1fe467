"""PyYAML held to the profile ``services.kb.index.frontmatter`` states: its loaders and ``parse``.

Imported by ``load_frontmatter`` at the first header it reads, not with the KB (docs/operations.md
"Memory at rest"). Nothing else imports PyYAML. A text outside the profile raises ``Refused``, which
``load_frontmatter`` says as its FrontmatterError.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CORE_SCHEMA = {  # YAML 1.2 core: tag → (pattern, the characters a match may start with)
    "tag:yaml.org,2002:null": (r"~|null|Null|NULL|", "~nN"),
    "tag:yaml.org,2002:bool": (r"true|True|TRUE|false|False|FALSE", "tTfF"),
    "tag:yaml.org,2002:int": (r"[-+]?(?:0|[1-9][0-9]*)", "-+0123456789"),
    "tag:yaml.org,2002:float": (
        r"[-+]?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+.0123456789",
    ),
}


class Refused(Exception):
    """The text is not YAML in the profile: ``line`` (1-based, in the note) and what is wrong."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class _Constructor(yaml.constructor.SafeConstructor):  # type: ignore[misc]  # PyYAML ships no type stubs: its classes are Any here
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(None, None, "a mapping key must be text", key_node.start_mark)
            if key_node.value in result:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key_node.value!r}", key_node.start_mark)
            result[key_node.value] = self.construct_object(value_node, deep=True)
        return result

    def construct_yaml_str(self, node: yaml.ScalarNode) -> str:
        text: str = super().construct_yaml_str(node)
        if _SURROGATE.search(text):  # pairs joined, lone ones replaced
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return text


_Constructor.add_constructor("tag:yaml.org,2002:str", _Constructor.construct_yaml_str)
_Constructor.add_constructor("tag:yaml.org,2002:map", _Constructor.construct_mapping)


class _Resolver(yaml.resolver.BaseResolver):  # type: ignore[misc]  # PyYAML ships no type stubs: its classes are Any here
    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}


for _tag, (_pattern, _first) in _CORE_SCHEMA.items():
    _Resolver.add_implicit_resolver(_tag, re.compile(f"(?:{_pattern})$"), list(_first) + ([""] if "~" in _first else []))


# Ignored: PyYAML ships no type stubs, so its classes are Any here.
class _PyLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, _Constructor, _Resolver):  # type: ignore[misc]
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)


if yaml.__with_libyaml__:
    class _CLoader(yaml.cyaml.CParser, _Constructor, _Resolver):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)
            _Constructor.__init__(self)
            _Resolver.__init__(self)

    _FAST: type[_PyLoader] | type[_CLoader] = _CLoader
else:
    _FAST = _PyLoader


def parse(text: str, first_line: int, max_depth: int) -> Any:
    """``text`` as the profile reads it (any YAML value; None when empty), collections nested at most
    ``max_depth`` deep. Raises Refused, naming the note's line (``first_line`` is the note's line of
    the text's first), and nothing else."""
    loader_class = _PyLoader if _SURROGATE_ESCAPE.search(text) else _FAST
    last = first_line + text.count("\n")
    try:
        _check_events(loader_class(text), max_depth)
        return loader_class(text).get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = min(first_line + mark.line, last) if mark is not None else first_line
        raise Refused(line, ", ".join(part for part in (exc.context, exc.problem) if part)) from None
    except (yaml.YAMLError, ValueError) as exc:  # a reader error, or an escape past U+10FFFF
        raise Refused(first_line, str(exc).split("\n", 1)[0]) from None


def _check_events(loader: Any, max_depth: int) -> None:
    """Refuse anchors, aliases, tags and deep nesting while only events exist (nothing built yet)."""
    depth = 0
    try:
        while (event := loader.get_event()) is not None and not isinstance(event, yaml.StreamEndEvent):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) or getattr(event, "tag", None):
                raise yaml.MarkedYAMLError(None, None, "anchors, aliases and tags are not supported", event.start_mark)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise yaml.MarkedYAMLError(None, None, f"nesting deeper than {max_depth} levels", event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        loader.dispose()

"""docs/reference/cli.md: every ``gateway`` command and flag with its help, from the argument parser.

The parser is ``gateway_cli.cli._parser``, the one ``gateway`` parses its arguments with;
sub-commands are walked to any depth. Arguments hidden from ``--help`` (``argparse.SUPPRESS``)
are hidden here too.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from gateway_cli.cli import _parser
from gateway_cli.docs_reference.markdown import code, heading, page, prose, slug, table


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, help, parser)`` of each sub-command of ``parser``, in the order they were added.

    argparse keeps them in a private list (``_actions``; the help of each in
    ``_choices_actions``): there is no public way to walk a parser.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:  # expanded as --help expands it
        text = text % {**vars(action), "default": action.default}
    return text


def _argument(action: argparse.Action) -> tuple[str, ...]:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        shown = names if action.nargs == 0 else f"{names} {action.metavar or action.dest.upper()}"
    else:
        shown = str(action.metavar or action.dest)
    values = ", ".join(code(str(c)) for c in action.choices) if action.choices else ""
    default = "" if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else code(str(action.default))
    required = "yes" if action.required or not action.option_strings else ""
    return code(shown), required, values, default, prose(_help(action))


def _command(words: list[str], about: str, parser: argparse.ArgumentParser, depth: int) -> list[str]:
    lines = heading(min(depth, 4), code(" ".join(words)), slug(*words))
    lines += [prose(about), ""] if about else []
    if parser.description and parser.description != about:
        lines += [prose(parser.description), ""]
    arguments = [a for a in parser._actions if a.help != argparse.SUPPRESS
                 and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if arguments:
        lines += table(("argument", "required", "values", "default", "help"), [_argument(a) for a in arguments])
    for name, text, sub in _subcommands(parser):
        lines += _command([*words, name], text, sub, depth + 1)
    return lines


def commands(parser: argparse.ArgumentParser | None = None, words: tuple[str, ...] = ("gateway",)) -> list[str]:
    """Every command line reachable from ``parser`` (``gateway up``, ``gateway config check``…), in order."""
    parser = parser or _parser()
    out: list[str] = []
    for name, _, sub in _subcommands(parser):
        out.append(" ".join((*words, name)))
        out += commands(sub, (*words, name))
    return out


def render() -> str:
    """The whole page."""
    parser = _parser()
    index = [(f"[{code(' '.join(['gateway', name]))}](#{slug('gateway', name)})", prose(text))
             for name, text, _ in _subcommands(parser)]
    intro = [
        f"{prose(parser.description or '')} Every command of `gateway` and its arguments, as `gateway COMMAND --help` "
        "shows them. `--home` defaults to `$GATEWAY_HOME`, else `~/.claude-gateway`. "
        "An operator error prints one line and exits 2.",
        "",
        *table(("command", "what it does"), index),
    ]
    body: list[str] = []
    for name, text, sub in _subcommands(parser):
        body += _command(["gateway", name], text, sub, 2)
    return page("Command line", "the argument parser of `gateway` (`gateway_cli/cli.py` and the modules that add its commands)", intro, body)

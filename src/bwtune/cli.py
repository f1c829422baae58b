"""The `bwtune` command line: tune and serve SGLang on Blackwell GPUs."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import pkgutil
import sys
from types import ModuleType

from bwtune import __version__, commands, console, exit_codes


def _command_modules() -> list[ModuleType]:
    found = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "run"):
            found.append(module)
    return found


# The commands that draw a table (bwtune.console): on a narrow terminal the columns that
# matter least are hidden, and said; --wide shows them all.
TABLE_COMMANDS = frozenset({"baseline", "demo", "facts", "plan", "runs", "sweep"})


def _add_wide(parser: argparse.ArgumentParser) -> None:
    """`--wide` on a command and on each of its own subcommands (`bwtune baseline list --wide`)."""
    parser.add_argument(
        "--wide",
        action="store_true",
        default=argparse.SUPPRESS,
        help="every column of the table, however wide the terminal",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                _add_wide(nested)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bwtune", description=__doc__)
    parser.add_argument("--version", action="version", version=f"bwtune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        command = sub.add_parser(module.NAME, description=module.HELP, help=module.HELP)
        module.add_arguments(command)
        if module.NAME in TABLE_COMMANDS:
            _add_wide(command)
        # `_parser`: the whole parser, for a command that describes it (completion), so no
        # command imports this module that discovers it.
        command.set_defaults(_run=module.run, _parser=parser)
    return parser


def command_parser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    """The parser of subcommand `name` (the top-level parser for none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser


def command_names(parser: argparse.ArgumentParser) -> list[str]:
    return [
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    ]


def unrecognized(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """One line naming the arguments `parser` does not take, with the option each may mean."""
    known = [option for action in parser._actions for option in action.option_strings]
    # The words after an unknown option are most likely its value: name the options alone.
    words = [word for word in words if word.startswith("-")] or words
    named = []
    for word in words:
        option = word.split("=", 1)[0]
        close = difflib.get_close_matches(option, known, n=1, cutoff=0.75) if option.startswith("-") else []
        named.append(f"{word} (did you mean {close[0]}?)" if close else word)
    return f"unrecognized argument{'s' if len(words) > 1 else ''}: {', '.join(named)}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    words = sys.argv[1:] if argv is None else argv
    names = command_names(parser)
    if words and not words[0].startswith("-") and words[0] not in names:
        close = difflib.get_close_matches(words[0], names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        parser.error(f"no command {words[0]!r}{hint}; `bwtune --help` lists them")
    # An argument the subcommand does not take: its own usage and one line naming it (plain
    # parse_args would print the top-level usage).
    args, extra = parser.parse_known_args(argv)
    if extra:
        where = command_parser(parser, args.command)
        where.error(unrecognized(where, extra))
    if not args.command:
        parser.print_help(sys.stderr)
        return exit_codes.BAD_INPUT
    console.set_wide(getattr(args, "wide", False))
    try:
        code = int(args._run(args))
        sys.stdout.flush()  # a reader that went away shows up here, not at interpreter exit
        return code
    except KeyboardInterrupt:
        print("bwtune: interrupted", file=sys.stderr)
        return exit_codes.CANCELED
    except BrokenPipeError:
        # `bwtune runs --json | head`: the reader has what it wanted. Point stdout at
        # /dev/null so the interpreter's last flush does not raise again, and exit as a
        # process killed by SIGPIPE would report it.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return exit_codes.BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())

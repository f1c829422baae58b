"""The `bwtune` command line: tune and serve SGLang on Blackwell GPUs."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from types import ModuleType

from bwtune import __version__, commands, exit_codes


def _command_modules() -> list[ModuleType]:
    found = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "run"):
            found.append(module)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bwtune", description=__doc__)
    parser.add_argument("--version", action="version", version=f"bwtune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        # A command that is not ready (HIDDEN) still runs but is left out of the listing.
        shown = {} if getattr(module, "HIDDEN", False) else {"help": module.HELP}
        command = sub.add_parser(module.NAME, description=module.HELP, **shown)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return exit_codes.BAD_INPUT
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

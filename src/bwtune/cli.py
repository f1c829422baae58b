"""The `bwtune` command line: tune and serve SGLang on Blackwell GPUs."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from bwtune import __version__, commands

EXIT_OK, EXIT_HOST_FAILED, EXIT_BAD_INPUT = 0, 1, 2


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
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        print("bwtune: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

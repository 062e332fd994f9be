"""`videoseek` command line: one sub-command per module, imported only when used.

Each command module defines `add_arguments(parser)` and `run(args) -> int`; every option has help
text and `--help` shows its default (`DefaultsHelpFormatter`). Imports are lazy so
`videoseek synth --help` never pays for torch or verl. Errors that are the user's (bad data, a
missing file: `videoseek.envs.errors.UserError`, `DataError`, `FileNotFoundError`) print one line and
exit 2; nothing else is caught here.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("videoseek.agents.demo", "synthesize a small set, run the scripted agents and the tiny model, print a table"),
    "synth": ("videoseek.envs.synth", "write synthetic seek-worthy videos and samples.jsonl"),
    "rollout": ("videoseek.agents.rollout_cli", "run a policy on a dataset and write trajectories"),
    "eval": ("videoseek.agents.evaluate", "compute metrics of a run directory"),
    "view": ("videoseek.viewer.cli", "open the interactive trajectory viewer in the browser"),
    "tiny-model": ("videoseek.agents.tiny_model", "build a tiny random Qwen2.5-VL or Qwen3-VL offline"),
    "export-verl": ("videoseek.training.exports.verl_parquet", "write parquet rows for verl's RL dataset"),
    "export-sft": ("videoseek.training.exports.sft", "write multi-turn SFT conversations from trajectories"),
    "convert": ("videoseek.envs.convert", "convert public dataset formats into VideoSeek samples"),
    "check-data": ("videoseek.envs.check_data", "validate a dataset and print statistics"),
    "annotate-masks": ("videoseek.agents.annotate_masks", "pre-annotate DM-GRPO mask patterns with an oracle policy"),
    "annotate-boxes": ("videoseek.agents.annotate_boxes", "propagate object boxes over clue frames with SAM2"),
}


def version() -> str:
    """The installed distribution's version; the package's `__version__` when not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("videoseek")
    except PackageNotFoundError:
        from videoseek import __version__

        return __version__


_STATES_DEFAULT = re.compile(r"(\(|; )default\b|%\(default\)")  # "(default 8)", "; default: key frames"


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to an option's help unless the help already states its default.

    Flags (store_true and the like) and options whose default is None or empty (not set) are
    left as they are: their help says what happens without them.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if _STATES_DEFAULT.search(text) or action.nargs == 0 or action.default in (None, [], argparse.SUPPRESS) or action.required:
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + " (default: %(default)s)"
        return text


def __getattr__(name: str):
    """`videoseek.cli.UserError` (and `DataError`): the classes of `videoseek.envs.errors`, kept
    importable from here for older code. Resolved on first use, so `videoseek --help` does not
    import the env package."""
    if name in ("UserError", "DataError"):
        from videoseek.envs import errors

        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load(name: str):
    module_name, _ = COMMANDS[name]
    return importlib.import_module(module_name)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="videoseek", description="VideoSeek: agentic video reasoning environment and rewards.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=DefaultsHelpFormatter)
        if name == only:
            _load(name).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command is not None and command not in COMMANDS:
        command = None
    parser = build_parser(only=command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from videoseek.envs.errors import UserError  # DataError is a UserError

    try:
        return int(_load(args.command).run(args) or 0)
    except (UserError, FileNotFoundError) as exc:
        print(f"videoseek {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"videoseek {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

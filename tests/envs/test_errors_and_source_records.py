"""One definition each, and dependencies that point one way (issue 36, items 5 and 6):

- the user-facing errors live in `videoseek.envs.errors`; `videoseek.cli.UserError` and
  `videoseek.envs.sample.DataError` are the same classes, and nothing in envs/ imports the CLI;
- the benchmark readers build rows with `videoseek.envs.source_records`, never with `convert`
  (which imports the benchmarks), and no benchmark module imports another;
- the benchmark registry is the choices of `convert --from` and `eval --benchmark`;
- one `parse_time`; `parse_span` (model text) and `span_field` (a data field) say what they read;
- the two Charades scorers print one table.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import videoseek
from videoseek.cli import build_parser, main

REPO = Path(videoseek.__file__).resolve().parent.parent  # the package dirs sit at the repo root (package-dir)


def _imports(path: Path) -> set[str]:
    """Every module a file imports (absolute names; `from . import x` resolved against videoseek.envs)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module if node.level == 0 else f"videoseek.envs.{node.module}")
    return out


def test_errors_are_one_pair_of_classes():
    from videoseek import cli
    from videoseek.envs import DataError as PackageDataError
    from videoseek.envs.errors import DataError, UserError
    from videoseek.envs.sample import DataError as SampleDataError

    assert cli.UserError is UserError and cli.DataError is DataError and SampleDataError is DataError is PackageDataError
    assert issubclass(DataError, UserError) and issubclass(DataError, ValueError)
    with pytest.raises(AttributeError):
        cli.NoSuchName  # noqa: B018


def test_the_cli_help_does_not_import_the_env_package():
    code = "import sys; from videoseek.cli import build_parser; build_parser(); print('videoseek.envs' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_envs_import_neither_the_cli_nor_convert_from_benchmarks():
    for path in sorted((REPO / "envs").rglob("*.py")):
        assert not any(m == "videoseek.cli" or m.startswith("videoseek.cli.") for m in _imports(path)), f"{path} imports the CLI"
    benchmarks = REPO / "envs" / "benchmarks"
    names = {p.stem for p in benchmarks.glob("*.py")}
    for path in sorted(benchmarks.glob("*.py")):
        imported = _imports(path)
        assert "videoseek.envs.convert" not in imported, f"{path.name} imports convert"
        others = {m.rsplit(".", 1)[-1] for m in imported if m.startswith("videoseek.envs.benchmarks.")} & names
        assert others <= {"_mc", "_scoring"}, f"{path.name} imports another benchmark: {others}"
    code = ("import sys, videoseek.envs.benchmarks as b\nfor name in b.BENCHMARKS: b.benchmark_module(name)\n"
            "print('videoseek.envs.convert' in sys.modules)")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_the_registry_is_the_choices_of_convert_and_eval(monkeypatch, tmp_path, capsys):
    from videoseek.envs import benchmarks
    from videoseek.envs.convert import TRAINING_FORMATS

    def choices(command: str, option: str) -> tuple[str, ...]:
        sub = next(a for a in build_parser(only=command)._actions if a.dest == "command").choices[command]
        return tuple(next(a for a in sub._actions if option in a.option_strings).choices)

    assert choices("convert", "--from") == TRAINING_FORMATS + tuple(benchmarks.BENCHMARKS)
    assert choices("eval", "--benchmark") == tuple(benchmarks.BENCHMARKS)
    monkeypatch.setitem(benchmarks.BENCHMARKS, "mvbench-again", "mvbench")  # one registration: both commands take it
    assert "mvbench-again" in choices("convert", "--from") and "mvbench-again" in choices("eval", "--benchmark")
    # --subtitles: the benchmarks whose module declares SUBTITLES
    assert benchmarks.subtitled_benchmarks() == ["videomme", "video-mme-v2", "videommmu"]
    assert main(["convert", "--from", "mvbench", str(tmp_path / "x.json"), "--out", str(tmp_path / "o.jsonl"), "--subtitles", str(tmp_path)]) == 2
    assert "--subtitles goes with --from videomme, video-mme-v2 or videommmu, not mvbench" in capsys.readouterr().err


def test_one_parse_time_and_two_span_readers_that_say_what_they_read():
    from videoseek.envs import actions
    from videoseek.envs.source_records import RowError, span_field
    from videoseek.rewards import timestamps

    assert actions.parse_time is timestamps.parse_time
    # strings, numbers, numpy scalars, padded strings: one parser for calls, rewards and data
    import numpy as np

    assert [timestamps.parse_time(v) for v in ("1:30", 7, np.float32(2.5), " " * 80 + "12s", "x" * 65, True)] == [90.0, 7.0, 2.5, 12.0, None, None]
    # model text: search, never raise
    assert timestamps.parse_span("it happens from 3.5 to 7 seconds") == (3.5, 7.0) and timestamps.parse_span("no span") is None
    # a data field: the whole field, strict, the field named
    assert span_field("00:00:03.5 - 00:00:07", "time_reference") == (3.5, 7.0)
    with pytest.raises(RowError, match="field 'time_reference': time span needs 0 <= start < end"):
        span_field([7, 3], "time_reference")
    with pytest.raises(RowError, match="field 'clue'"):
        span_field("it happens from 3.5 to 7 seconds", "clue")


def test_the_charades_scorers_print_one_table():
    from videoseek.envs.benchmarks import _scoring, charades_sta, charades_timelens

    numbers = {"n": 4, "IOU@3": 75.0, "IOU@5": 50.0, "IOU@7": 25.0, "mIOU": 48.123}
    sta = charades_sta.format_table({**numbers, "bad_predictions": 1})
    timelens = charades_timelens.format_table({**numbers, "unparseable": 1, "reversed": 0, "protocol": "raw"})
    row = "| all | 4 | 75.00 | 50.00 | 25.00 | 48.12 |"
    assert sta == _scoring.moment_retrieval_table("Charades-STA", numbers, "1 of 4 answers had no readable moment (IoU 0).")
    assert sta.splitlines()[2] == timelens.splitlines()[2] == row
    assert timelens.splitlines()[0] == "| Charades-TimeLens | n | R1@0.3 | R1@0.5 | R1@0.7 | mIoU |"

"""`--tools` on the command line: `videoseek rollout` plays the env with the listed tools (the
one-file custom tool by its path included), run.json records them and `--from-run` replays them,
`videoseek eval` reports calls per tool (schema-2 records and version-1 files alike), and
`export-sft` writes the system message of the run's tools."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from videoseek.agents.policy import PolicyOutput
from videoseek.agents.scripted import SCRIPTED, ScriptedPolicy
from videoseek.cli import main
from videoseek.envs.sample import write_jsonl
from videoseek.envs.trajectory import read_trajectories

REPO = Path(__file__).resolve().parents[2]
CUSTOM = "examples/custom_tool.py:FrameAtTool"  # the one-file tool, by its path from the repository root
CALLS = [
    '<think>Look at the flash.</think>\n<tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 13.5}}</tool_call>',
    '<think>One frame.</think>\n<tool_call>{"name": "frame_at", "arguments": {"time": 12.5}}</tool_call>',
    "<think>Green at 12.5s.</think>\n<answer>B</answer>",
]


class FrameAtProbe(ScriptedPolicy):
    """Crops the clue, looks at one frame with the custom tool, answers."""

    name = "frame-at-probe"

    def turn(self, inp):
        return PolicyOutput(text=CALLS[min(sum(m.role == "tool" for m in inp.messages), 2)])


@pytest.fixture
def cli(index_sample, tmp_path, monkeypatch):
    """(data file, tmp folder); commands run from the repository root with the probe policy registered."""
    monkeypatch.chdir(REPO)
    monkeypatch.setitem(SCRIPTED, FrameAtProbe.name, FrameAtProbe)
    return write_jsonl([index_sample], tmp_path / "samples.jsonl"), tmp_path


def rollout(data, out, *extra: str) -> int:
    return main(["rollout", "--data", str(data), "--policy", FrameAtProbe.name, "--group-size", "2", "--out", str(out), "--no-progress", *extra])


def metrics_of(run: Path) -> dict:
    assert main(["eval", str(run)]) == 0
    return json.loads((run / "metrics.json").read_text())


def test_rollout_with_the_custom_tool_records_and_replays_it_and_eval_counts_its_calls(cli, capsys):
    data, tmp = cli
    run = tmp / "run"
    assert rollout(data, run, "--tools", f"crop_video,{CUSTOM}") == 0
    record = json.loads((run / "run.json").read_text())
    assert record["env"]["tools"] == ["crop_video", CUSTOM] and record["args"]["tools"] == f"crop_video,{CUSTOM}"
    trajs = read_trajectories(run)
    assert len(trajs) == 2 and all(t.correct for t in trajs)
    for t in trajs:
        assert [c.tool for c in t.calls] == ["crop_video", "frame_at"] and t.calls[1].arguments == {"time": 12.5}
        assert [f.t for f in t.turns[1].observation.frames] == [12.5] and (run / t.turns[1].observation.frames[0].path).is_file()
    capsys.readouterr()
    m = metrics_of(run)
    assert "calls[frame_at]" in capsys.readouterr().out
    assert m["calls"] == 2.0 and m["crop_rate"] == 1.0 and m["invalid_call_rate"] == 0.0 and m["valid_format"] == 1.0
    assert m["calls_per_tool"] == {"crop_video": 1.0, "frame_at": 1.0} and m["tool_rate"] == {"crop_video": 1.0, "frame_at": 1.0}

    # --from-run replays the tools: the same episodes
    assert main(["rollout", "--from-run", str(run), "--out", str(tmp / "replay"), "--no-progress"]) == 0
    assert json.loads((tmp / "replay" / "run.json").read_text())["env"]["tools"] == ["crop_video", CUSTOM]
    assert [(t.reward, [u.action for u in t.turns]) for t in read_trajectories(tmp / "replay")] == [(t.reward, [u.action for u in t.turns]) for t in trajs]

    # a record from before --tools existed replays with the default tools: the frame_at call is refused
    old = tmp / "old"
    shutil.copytree(run, old)
    record = json.loads((old / "run.json").read_text())
    del record["args"]["tools"], record["env"]["tools"]
    (old / "run.json").write_text(json.dumps(record))
    assert main(["rollout", "--from-run", str(old), "--out", str(tmp / "old-replay"), "--no-progress"]) == 0
    assert json.loads((tmp / "old-replay" / "run.json").read_text())["env"]["tools"] == ["crop_video"]
    replayed = read_trajectories(tmp / "old-replay")
    assert all([c.tool for c in t.calls] == ["crop_video"] and "unknown tool 'frame_at'" in t.turns[1].error for t in replayed)
    m = metrics_of(tmp / "old-replay")
    assert m["calls_per_tool"] == {"crop_video": 1.0} and m["invalid_call_rate"] == 0.5


def test_export_sft_writes_the_system_message_of_the_runs_tools(cli, capsys):
    import pandas as pd

    from videoseek.training.exports.sft import system_text

    data, tmp = cli
    run = tmp / "run"
    assert rollout(data, run, "--tools", f"crop_video,{CUSTOM}") == 0
    assert main(["export-sft", "--runs", str(run), "--out", str(tmp / "sft"), "--all"]) == 0
    rows = pd.read_parquet(tmp / "sft" / "train.parquet")
    system = rows.iloc[0]["messages"][0]["content"]
    assert system == system_text(["crop_video", CUSTOM]) != system_text() and '"name": "frame_at"' in system
    roles = [m["role"] for m in rows.iloc[0]["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert [len(v["video"]) for v in rows.iloc[0]["videos"]][-1] == 1  # frame_at's one frame, as one video
    assert rows.iloc[0]["messages"][4]["content"] == CALLS[1]  # the call as written, whatever the tool
    # a run that does not record its tools (bare run_rollouts output) takes --tools; without them a
    # call of a tool the default list lacks is an error, not a conversation the system message contradicts
    (run / "run.json").unlink()
    capsys.readouterr()
    assert main(["export-sft", "--runs", str(run), "--out", str(tmp / "bare"), "--all"]) == 2
    assert "calls frame_at, which the run's tools (crop_video) do not list" in capsys.readouterr().err
    assert main(["export-sft", "--runs", str(run), "--out", str(tmp / "bare"), "--all", "--tools", f"crop_video,{CUSTOM}"]) == 0
    assert pd.read_parquet(tmp / "bare" / "train.parquet").iloc[0]["messages"][0]["content"] == system


def test_eval_lists_a_configured_tool_never_called_and_reads_version_1_files(cli):
    data, tmp = cli
    run = tmp / "zoom"
    assert main(["rollout", "--data", str(data), "--policy", "oracle", "--tools", "crop_video,zoom", "--out", str(run), "--no-progress"]) == 0
    m = metrics_of(run)
    assert m["calls_per_tool"] == {"crop_video": 1.0, "zoom": 0.0} and m["tool_rate"] == {"crop_video": 1.0, "zoom": 0.0}
    # the same episode written as version 1 (crop_video actions and spans, no tool names)
    v1 = tmp / "v1"
    v1.mkdir()
    line = json.loads((run / "trajectories.jsonl").read_text().splitlines()[0])
    line["schema_version"] = 1
    for turn in line["turns"]:
        if turn["action"]["type"] == "tool_call":
            turn["action"] = {"type": "crop_video", **turn["action"]["arguments"]}
        if turn["call"]:
            call = turn["call"]
            turn["call"] = {k: call[k] for k in ("index", "start", "end", "gain", "duplicate_of", "fragment", "best_prior_tiou")}
            turn["call"]["requested"] = [call["requested"]["start"], call["requested"]["end"]]
    (v1 / "trajectories.jsonl").write_text(json.dumps(line) + "\n")
    old = metrics_of(v1)
    assert old["calls_per_tool"] == {"crop_video": 1.0} and old["crop_rate"] == 1.0 and old["calls"] == 1.0


def test_bad_tools_flags_are_one_line_errors(cli, capsys):
    data, tmp = cli
    assert main(["rollout", "--data", str(data), "--policy", "oracle", "--tools", "crop_video,nope", "--out", str(tmp / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--tools: unknown tool 'nope'" in err
    assert main(["rollout", "--data", str(data), "--policy", "no-tool", "--tools", "zoom", "--no-tools", "--out", str(tmp / "b")]) == 2
    assert "--tools and --no-tools" in capsys.readouterr().err

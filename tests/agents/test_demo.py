from __future__ import annotations

import json
import pytest

from videoseek.cli import COMMANDS, main


def test_demo_end_to_end(tmp_path, capsys, single_thread_torch):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--n", "5", "--model-samples", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    agents = summary["agents"]
    assert set(agents) == {"oracle", "uniform", "random", "no-tool", "tiny-qwen2.5-vl"}
    for row in agents.values():
        assert set(row) >= {"accuracy", "coverage", "evidence", "turns", "reward"}
    assert agents["oracle"]["accuracy"] >= 0.8 and agents["oracle"]["coverage"] == pytest.approx(1.0)
    assert agents["no-tool"]["accuracy"] < agents["oracle"]["accuracy"]
    assert agents["no-tool"]["coverage"] == 0.0
    for name in ("oracle", "no-tool", "tiny-model-run"):
        assert len((out / name / "trajectories.jsonl").read_text().splitlines()) >= 1
    # Every run leaves the one run record: the viewer explains its rewards from it.
    from videoseek.viewer.rewardinfo import find_reward_config

    for name, policy in (("oracle", "oracle"), ("tiny-model-run", f"hf:{out / 'tiny-model'}")):
        record = json.loads((out / name / "run.json").read_text())
        assert record["command"] == "demo" and record["policy"] == policy and record["seed"] == 0
        assert record["env"]["reward"]["preset"] == "csgrpo" and record["software"]["videoseek"]
        config, source, problem = find_reward_config(out / name)
        assert problem is None and config.preset == "csgrpo" and source == str(out / name / "run.json")
    record = json.loads((out / "tiny-model-run" / "run.json").read_text())
    assert record["model"]["weights_sha256"] and record["decoding"] == {"seed": 0, "max_new_tokens": 48, "temperature": 1.0}
    printed = capsys.readouterr().out
    assert "oracle" in printed and "below chance" in printed and "trajectories.jsonl" in printed


def test_rollout_and_eval_commands(tmp_path, capsys):
    data = tmp_path / "data"
    assert main(["synth", "--out", str(data), "--n", "3", "--seed", "2"]) == 0
    run = tmp_path / "run"
    assert main(["rollout", "--data", str(data / "samples.jsonl"), "--policy", "uniform", "--out", str(run), "--group-size", "2", "--no-progress"]) == 0
    assert len((run / "trajectories.jsonl").read_text().splitlines()) == 6
    assert main(["eval", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["episodes"] == 6 and metrics["calls"] == pytest.approx(4.0)
    assert set(metrics["by_problem_type"]) and set(metrics["by_task_kind"])


@pytest.mark.parametrize("backend", ["pyav", "decord", "torchcodec"])
def test_rollout_takes_every_video_backend(tmp_path, backend):
    from videoseek.envs.video import backend_missing

    if backend_missing(backend):
        pytest.skip(backend_missing(backend))
    data = tmp_path / "data"
    assert main(["synth", "--out", str(data), "--n", "2", "--seed", "1"]) == 0
    run = tmp_path / "run"
    argv = ["rollout", "--data", str(data / "samples.jsonl"), "--policy", "uniform", "--out", str(run), "--no-progress"]
    assert main([*argv, "--env", f"video_backend={backend}"]) == 0
    assert len((run / "trajectories.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "argv,message",
    [
        (["rollout", "--data", "nope.jsonl", "--out", "x"], "nope.jsonl: dataset file not found"),
        (["eval", "missing-run"], "no trajectories.jsonl"),
        (["rollout", "--data", "{bad}", "--out", "x", "--policy", "wizard"], "unknown policy 'wizard'"),
        (["rollout", "--data", "{bad}", "--out", "x", "--reward", "nonsense"], "--reward"),
        (["rollout", "--data", "{bad}", "--out", "x", "--env", "video_backend=vlc"], "--env: "),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "video": "v.mp4", "question": "q", "answer": "1", "problem_type": "numerical"}\n')
    argv = [a.replace("{bad}", str(good)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_bad_row_names_file_line_and_field(tmp_path, capsys):
    data = tmp_path / "s.jsonl"
    data.write_text(
        '{"id": "a", "video": "v.mp4", "question": "q", "answer": "1", "problem_type": "numerical"}\n'
        '{"id": "b", "video": "v.mp4", "question": "q", "answer": "1", "problem_type": "numerical", "clue_intervals": [[5, 2]]}\n'
    )
    assert main(["rollout", "--data", str(data), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "s.jsonl:2" in err and "sample b" in err and "clue_intervals" in err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert f"usage: videoseek {name}" in capsys.readouterr().out


def test_quickstart_example_runs(tmp_path, capsys):
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"
    runpy.run_path(str(script), run_name="not_main")["main"](tmp_path)
    printed = capsys.readouterr().out
    assert "oracle: accuracy 1.00, coverage 1.00, episodes 16" in printed
    assert len((tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()) == 16


def test_readme_demo_table_is_what_the_demo_prints(tmp_path, single_thread_torch):
    """The README's table comes from `videoseek demo` with its defaults: a run today must give it back."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split(" agent           accuracy", 1)[1].split("```", 1)[0]
    shown = {m[0]: [float(v) for v in m[1:6]] + [int(m[6])] for m in re.findall(r"^ (\S+)\s+" + r"(\S+)\s+" * 5 + r"(\d+)$", block, re.M)}
    assert set(shown) == {"oracle", "uniform", "random", "no-tool", "tiny-qwen2.5-vl"}, block
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    agents = json.loads((tmp_path / "demo" / "summary.json").read_text())["agents"]
    for name, values in shown.items():
        row = agents[name]
        fresh = [round(row[k], 2) for k in ("accuracy", "coverage", "evidence", "turns", "reward")] + [row["episodes"]]
        assert fresh == pytest.approx(values, abs=0.006), (name, "update README.md's demo table to what `videoseek demo` prints")

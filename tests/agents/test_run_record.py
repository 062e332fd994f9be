"""run.json records what decides a run (`videoseek.agents.run_record`) and `videoseek rollout
--from-run` replays it; `--seed`, `--top-p` and `--top-k` reach the model policy."""

from __future__ import annotations

import json

import pytest

from videoseek.envs.trajectory import read_trajectories
from videoseek.agents.run_record import RECORDED_PACKAGES, file_sha256, run_record, weights_sha256
from videoseek.cli import main
from videoseek.envs.sample import write_jsonl


def texts(run) -> list[list[str]]:
    return [[turn.assistant for turn in t.turns] for t in read_trajectories(run)]


@pytest.fixture
def data(index_sample, tmp_path):
    return write_jsonl([index_sample], tmp_path / "data" / "samples.jsonl")


def rollout(data, model, out, *extra: str) -> int:
    return main(["rollout", "--data", str(data), "--policy", f"hf:{model}", "--out", str(out), "--max-new-tokens", "12",
                 "--max-turns", "2", "--group-size", "2", "--no-progress", *extra])  # fmt: skip


def test_seed_reaches_the_model_policy(tiny_model_dir, data, tmp_path, single_thread_torch):
    for name, seed in (("a", "3"), ("b", "3"), ("c", "9")):
        assert rollout(data, tiny_model_dir, tmp_path / name, "--seed", seed) in (0, 1)
    assert texts(tmp_path / "a") == texts(tmp_path / "b") != texts(tmp_path / "c")


def test_run_json_records_decoding_data_model_and_software(tiny_model_dir, data, tmp_path, single_thread_torch):
    assert rollout(data, tiny_model_dir, tmp_path / "run", "--seed", "4", "--temperature", "0.7", "--top-p", "0.9", "--top-k", "20") in (0, 1)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["command"] == "rollout" and record["seed"] == 4 and record["policy"] == f"hf:{tiny_model_dir}"
    assert record["decoding"] == {"seed": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "max_new_tokens": 12}
    assert record["data"] == [str(data.resolve())] and record["data_files"] == [{"path": str(data.resolve()), "sha256": file_sha256(data)}]
    assert record["model"] == {"path": str(tiny_model_dir.resolve()), "weights_sha256": weights_sha256(tiny_model_dir)}
    assert len(record["model"]["weights_sha256"]) == 64 and record["software"]["videoseek"]
    from importlib.metadata import version  # the versions that decide the numbers: a rerun elsewhere can tell which package moved

    assert record["software"]["packages"]["torch"] == version("torch") and set(record["software"]["packages"]) == set(RECORDED_PACKAGES)
    assert record["env"]["max_turns"] == 2 and record["args"]["group_size"] == 2
    assert record["args"]["threads"] == 1  # not passed: the count torch ran with (single_thread_torch's) is recorded
    assert record["args"]["reuse_kv"] is True  # the turn cache (agents.hf_policy.TurnCache), on by default


def test_the_turn_cache_setting_is_recorded_and_replayed(tiny_model_dir, data, tmp_path, single_thread_torch):
    assert rollout(data, tiny_model_dir, tmp_path / "run", "--temperature", "0", "--no-kv-reuse") in (0, 1)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["args"]["reuse_kv"] is False
    assert main(["rollout", "--from-run", str(tmp_path / "run"), "--out", str(tmp_path / "replay"), "--no-progress"]) in (0, 1)
    assert json.loads((tmp_path / "replay" / "run.json").read_text())["args"]["reuse_kv"] is False
    # greedy, the cache changes no token: the same episodes with it
    assert rollout(data, tiny_model_dir, tmp_path / "cached", "--temperature", "0") in (0, 1)
    assert texts(tmp_path / "cached") == texts(tmp_path / "run") == texts(tmp_path / "replay")
    # a record from before the setting existed replays without the cache, as it was made
    meta = tmp_path / "cached" / "run.json"
    record = json.loads(meta.read_text())
    del record["args"]["reuse_kv"]
    meta.write_text(json.dumps(record))
    assert main(["rollout", "--from-run", str(tmp_path / "cached"), "--out", str(tmp_path / "old"), "--no-progress"]) in (0, 1)
    assert json.loads((tmp_path / "old" / "run.json").read_text())["args"]["reuse_kv"] is False


def test_from_run_replays_the_recorded_evaluation(tiny_model_dir, data, tmp_path, single_thread_torch, capsys):
    import torch

    assert rollout(data, tiny_model_dir, tmp_path / "run", "--seed", "5", "--temperature", "0.9", "--top-k", "30", "--threads", "1") in (0, 1)
    original = texts(tmp_path / "run")
    # the replay takes nothing from the command line but the new folder: not the default decoding,
    # nor the thread count this process has now (CPU sums split by it)
    torch.set_num_threads(2)
    assert main(["rollout", "--from-run", str(tmp_path / "run"), "--out", str(tmp_path / "replay"), "--no-progress"]) in (0, 1)
    assert torch.get_num_threads() == 1
    assert texts(tmp_path / "replay") == original and any(any(turn) for turn in original)
    replay = [(t.sample_id, t.reward, [turn.action for turn in t.turns]) for t in read_trajectories(tmp_path / "replay")]
    assert replay == [(t.sample_id, t.reward, [turn.action for turn in t.turns]) for t in read_trajectories(tmp_path / "run")]
    record = json.loads((tmp_path / "replay" / "run.json").read_text())
    assert record["replay_of"] == str((tmp_path / "run").resolve()) and record["decoding"]["top_k"] == 30
    # a changed data file is refused with one line
    data.write_text(data.read_text() + "\n")
    assert main(["rollout", "--from-run", str(tmp_path / "run"), "--out", str(tmp_path / "again")]) == 2
    assert "changed since the recorded run" in capsys.readouterr().err


def test_from_run_refuses_what_it_cannot_replay(data, tmp_path, capsys):
    assert main(["rollout", "--from-run", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["rollout", "--out", str(tmp_path / "x")]) == 2
    assert "--data is required" in capsys.readouterr().err
    assert main(["rollout", "--data", str(data), "--policy", "oracle", "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    assert main(["rollout", "--from-run", str(tmp_path / "s"), "--out", str(tmp_path / "s")]) == 2
    assert "new folder" in capsys.readouterr().err
    assert main(["rollout", "--data", str(data), "--policy", "oracle", "--top-k", "0", "--out", str(tmp_path / "k")]) == 2
    assert main(["rollout", "--data", str(data), "--policy", "oracle", "--threads", "0", "--out", str(tmp_path / "t")]) == 2
    assert "--threads must be at least 1" in capsys.readouterr().err


def test_run_record_without_a_model_or_git(tmp_path):
    (tmp_path / "d.jsonl").write_text("{}\n")
    record = run_record("x", {"seed": 1}, data=[tmp_path / "d.jsonl"], model="oracle")
    assert record["model"] is None and record["seed"] == 1 and record["data_files"][0]["sha256"] == file_sha256(tmp_path / "d.jsonl")


def test_the_viewer_reads_the_nearest_run_record_and_names_a_broken_one(tmp_path):
    from videoseek.agents.run_record import find_run_record, write_run_record
    from videoseek.envs.env import EnvConfig
    from videoseek.rewards import RewardConfig
    from videoseek.viewer.rewardinfo import find_reward_config

    (tmp_path / "d.jsonl").write_text("{}\n")
    env = EnvConfig(reward=RewardConfig(preset="dmgrpo"), tools=["crop_video", "zoom"])
    write_run_record(tmp_path / "run", run_record("x", {}, data=[tmp_path / "d.jsonl"], env=env, policy="oracle", seed=3))
    step = tmp_path / "run" / "rollouts" / "step_0002"
    step.mkdir(parents=True)
    path, record, problem = find_run_record(step)
    assert path == tmp_path / "run" / "run.json" and problem is None and record["env"]["tools"] == ["crop_video", "zoom"]
    config, source, problem = find_reward_config(step)
    assert config.preset == "dmgrpo" and source == str(path) and problem is None
    assert find_reward_config(tmp_path / "run" / "rollouts" / "step_0002" / "deeper")[0] is None  # three levels up: not this run's
    (step / "run.json").write_text("[1]")  # a broken record nearer the episodes is named, not passed over
    config, source, problem = find_reward_config(step)
    assert config is None and problem == f"{step / 'run.json'}: not a JSON object"
    (step / "run.json").write_text('{"env": {"reward": {"preset": "nope"}}}')
    assert "reward config not usable" in find_reward_config(step)[2]
    (step / "run.json").unlink()
    (tmp_path / "run" / "run.json").write_text('{"command": "sft"}')
    assert find_reward_config(step)[2] == f"{tmp_path / 'run' / 'run.json'}: reward config not usable (records no reward config (env.reward))"


def test_the_look_on_probe_runs_a_model_from_two_missed_crops_and_replays(tiny_model_dir, tmp_path, single_thread_torch):
    """`videoseek rollout --look-on-probe`: the probe's two crops, then the model's own turns (its
    first call sees them as history); `videoseek eval` counts every probed episode; run.json
    records the probe and `--from-run` replays it."""
    from videoseek.envs.synth import generate_dataset

    samples = generate_dataset(tmp_path / "synth", n=2, seed=3, kinds=["flash_colour"], min_duration=10, max_duration=10, avoid_uniform=(4,))
    data = write_jsonl(samples, tmp_path / "samples.jsonl")
    env = ["--env", "initial_frames=4", "--env", "frames_per_call=4", "--max-pixels", str(112 * 112)]
    run = tmp_path / "probe"
    assert rollout(data, tiny_model_dir, run, "--look-on-probe", "--temperature", "0", "--group-size", "1", "--max-turns", "3", *env) in (0, 1)
    trajs = read_trajectories(run)
    assert len(trajs) == 2
    for t in trajs:
        (a, b), = t.clue_intervals
        assert [turn.call.end <= a or turn.call.start >= b for turn in t.turns[:2]] == [True, True]  # two crops that missed
        assert len(t.turns) == 3 and t.turns[2].tokens and not t.turns[0].tokens  # the model sampled the third turn; the probe wrote the first two
    assert main(["eval", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["look_on_n"] == 2 and metrics["look_on"] == sum(t.turns[2].tool_name == "crop_video" for t in trajs) / 2
    assert json.loads((run / "run.json").read_text())["args"]["look_on_probe"] == "two_misses"
    assert main(["rollout", "--from-run", str(run), "--out", str(tmp_path / "replay"), "--no-progress"]) in (0, 1)
    assert texts(tmp_path / "replay") == texts(run)
    # The exploring start's probe: the first quarter window, whatever it shows, then the model
    first = tmp_path / "first"
    assert rollout(data, tiny_model_dir, first, "--look-on-probe", "first_window", "--temperature", "0", "--group-size", "1", "--max-turns", "2", *env) in (0, 1)
    for t in read_trajectories(first):
        assert [u.forced for u in t.turns] == [True, False] and (t.turns[0].call.start, t.turns[0].call.end) == (0.0, 2.5) and t.turns[1].tokens

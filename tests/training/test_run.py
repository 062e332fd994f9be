"""`training/run_csgrpo.py`: `--dry-run` composes verl's config on CPU; the local backend trains."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml

pytest.importorskip("verl")

from videoseek.agents.tiny_model import ensure_tiny_model
from videoseek.envs.sample import write_jsonl
from videoseek.training import run_csgrpo
from videoseek.training.verl_plugin.config import CONFIGS_DIR as CONFIGS
from videoseek.training.verl_plugin.config import list_ready_configs

FAST = {
    "max_turn_tokens": 24, "group_size": 3, "batch_size": 1,
    "env": {"initial_frames": 2, "frames_per_call": 2, "max_turns": 2, "max_total_frames": 8, "max_pixels": 112 * 112},
}  # fmt: skip


@pytest.fixture
def one_thread():
    """Torch's two threads fight over two busy cores; one is about ten times faster here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return ensure_tiny_model(cache_dir=tmp_path_factory.mktemp("models"))


# A long reference in the tiny model's own vocabulary (its tokenizer was trained on protocol text
# like this), so random rollouts overlap it by different amounts and PRR rewards differ in a group.
REFERENCE = (
    "<think>At 12.5s the ball is green. The frames at 3.0s and 8.0s do not show the ball, so I should look closer "
    "between 11.0s and 14.0s. I see the green ball flashes at 12.5s, so the answer is B. The sparse frames are not "
    "enough to tell when the light turns on.</think>"
)


@pytest.fixture
def data(tmp_path, index_sample):
    sample = index_sample.model_copy(update={"reference_reasoning": REFERENCE})
    return write_jsonl([sample], tmp_path / "samples.jsonl")


def test_dry_run_composes_validates_and_writes_the_config(tmp_path, tiny, data, capsys):
    out = tmp_path / "run"
    assert run_csgrpo.main(["--dry-run", "--data", str(data), "--model", str(tiny), "--reward", "dmgrpo", "--out", str(out), "--batch-size", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].endswith("-m verl.trainer.main_ppo \\")
    cfg = yaml.safe_load((out / "verl_config.yaml").read_text())
    assert cfg["algorithm"]["adv_estimator"] == "videoseek_grpo"
    assert cfg["actor_rollout_ref"]["rollout"]["name"] == "vllm"
    assert cfg["actor_rollout_ref"]["rollout"]["agent"]["default_agent_loop"] == "videoseek"
    assert cfg["reward"]["custom_reward_function"]["path"] == "pkg://videoseek.training.verl_plugin.reward_fn"
    assert cfg["trainer"]["use_v1"] is True and cfg["trainer"]["v1"]["sampler"]["sync_refill_failed_groups"] is True
    loop = yaml.safe_load((out / "agent_loop.yaml").read_text())
    assert loop[0]["_target_"] == "videoseek.training.verl_plugin.agent_loop.VideoSeekAgentLoop" and loop[0]["videoseek"]["reward"]["preset"] == "dmgrpo"
    assert (out / "data" / "train.parquet").is_file() and "verl.trainer.main_ppo" in (out / "command.sh").read_text()
    # the run record, as the local backend writes it: the viewer reads its reward config above RUN/rollouts
    record = json.loads((out / "run.json").read_text())
    assert record["command"] == "grpo" and record["backend"] == "verl" and record["policy"] == f"hf:{tiny}"
    assert record["env"]["reward"]["preset"] == "dmgrpo" and record["model"]["weights_sha256"] and record["decoding"]["seed"] == 0


def test_dry_run_passes_the_tools_to_the_env_rows_and_agent_loop(tmp_path, tiny, data, capsys, monkeypatch):
    """`--tools` reaches the agent-loop YAML (a tool file's path made absolute, for Ray workers started
    elsewhere), the exported rows and the printout; an unknown tool is one line, before any work."""
    import pandas as pd
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)  # the custom tool by its path relative to the repository, as a user writes it
    out = tmp_path / "run"
    argv = ["--dry-run", "--data", str(data), "--model", str(tiny), "--out", str(out), "--batch-size", "1"]
    assert run_csgrpo.main([*argv, "--tools", "crop_video, zoom,examples/custom_tool.py:FrameAtTool"]) == 0
    tools = ["crop_video", "zoom", f"{root / 'examples' / 'custom_tool.py'}:FrameAtTool"]
    loop = yaml.safe_load((out / "agent_loop.yaml").read_text())
    assert loop[0]["videoseek"]["env"]["tools"] == tools
    assert f"env tools: {', '.join(tools)}" in capsys.readouterr().out
    row = pd.read_parquet(out / "data" / "train.parquet").iloc[0]
    assert list(row["extra_info"]["tools"]) == ["crop_video", "zoom", "frame_at"]
    assert run_csgrpo.main([*argv, "--out", str(tmp_path / "bad"), "--tools", "crop_video,telescope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tools" in err[0] and "telescope" in err[0] and not (tmp_path / "bad").exists()


@pytest.fixture(scope="module")
def many(tmp_path_factory, index_video):
    """Enough questions for one batch of the largest ready config (32) after the 10% validation split."""
    from videoseek.envs.sample import VideoSample

    base = VideoSample(id="q", video=str(index_video), question="Which colour flashes?", options=["A. red", "B. green"], answer="B", clue_intervals=[(12.0, 13.5)])
    return write_jsonl([base.model_copy(update={"id": f"q{k}"}) for k in range(36)], tmp_path_factory.mktemp("many") / "samples.jsonl")


@pytest.mark.parametrize("name", list_ready_configs())
def test_ready_configs_pass_verls_validation(tmp_path, many, name):
    assert run_csgrpo.main(["--dry-run", "--config", name, "--data", str(many), "--out", str(tmp_path / name)]) == 0
    cfg = yaml.safe_load((tmp_path / name / "verl_config.yaml").read_text())
    ready = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    expected = ready.get("model") or "tiny-qwen2_5-vl"  # learn_cpu trains the tiny model it is given
    assert cfg["trainer"]["n_gpus_per_node"] >= 1 and expected in cfg["actor_rollout_ref"]["model"]["path"]


@pytest.mark.parametrize("name", [n for n in list_ready_configs() if n.startswith("qwen3vl")])
def test_qwen3_vl_configs_validate_with_the_tiny_qwen3_vl_for_the_weights(tmp_path, many, tiny_qwen3_model_dir, name):
    """With a local Qwen3-VL folder, validation also reads the first row through verl's dataset with
    Qwen3-VL's own tokenizer and processor (32 px merged patches, `<t seconds>` frame times)."""
    out = tmp_path / name
    assert run_csgrpo.main(["--dry-run", "--config", name, "--model", str(tiny_qwen3_model_dir), "--data", str(many), "--out", str(out)]) == 0
    cfg = yaml.safe_load((out / "verl_config.yaml").read_text())
    assert cfg["actor_rollout_ref"]["model"]["path"] == str(tiny_qwen3_model_dir)
    ready = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    assert ready["model"].startswith("Qwen/Qwen3-VL-") and ready["env"]["max_pixels"] % (32 * 32) == 0


def test_dry_run_rejects_an_unknown_verl_key(tmp_path, data, tiny, capsys):
    argv = ["--dry-run", "--data", str(data), "--model", str(tiny), "--out", str(tmp_path / "bad"), "--batch-size", "1", "--override", "actor_rollout_ref.rollout.no_such_key=1"]
    assert run_csgrpo.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_key" in err[0]  # one line, before any export work
    assert not (tmp_path / "bad" / "data").exists()


def test_dry_run_refuses_fewer_rows_than_one_batch(tmp_path, data, tiny, capsys):
    argv = ["--dry-run", "--data", str(data), "--model", str(tiny), "--out", str(tmp_path / "small"), "--batch-size", "4"]
    assert run_csgrpo.main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("run_csgrpo: error")]
    assert len(err) == 1 and "1 rows, fewer than data.train_batch_size=4" in err[0]


@pytest.mark.parametrize("preset,refused", [("dmgrpo", True), ("tgrpo", True), ("sfgrpo", True), ("csgrpo", False), ("default", False)])
def test_legacy_trainer_is_refused_for_group_presets(tmp_path, data, tiny, capsys, preset, refused):
    argv = ["--dry-run", "--data", str(data), "--model", str(tiny), "--out", str(tmp_path / preset), "--reward", preset, "--batch-size", "1"]
    assert run_csgrpo.main([*argv, "--override", "trainer.use_v1=false"]) == (2 if refused else 0)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("run_csgrpo: error")]
    if refused:
        assert len(err) == 1 and "trainer.use_v1=false" in err[0] and preset in err[0]


def test_legacy_trainer_is_refused_for_turn_level_credit(tmp_path, data, tiny, capsys):
    argv = ["--dry-run", "--data", str(data), "--model", str(tiny), "--batch-size", "1", "--advantage", "turn"]
    assert run_csgrpo.main([*argv, "--out", str(tmp_path / "legacy"), "--override", "trainer.use_v1=false"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("run_csgrpo: error")]
    assert len(err) == 1 and "trainer.use_v1=false" in err[0] and "videoseek_turn_grpo" in err[0]
    assert run_csgrpo.main([*argv, "--out", str(tmp_path / "v1")]) == 0  # the v1 trainer (the default) takes it


def test_local_backend_two_steps_change_the_parameters(tmp_path, tiny, data, one_thread):
    from transformers import AutoModelForImageTextToText

    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump(FAST))
    out = tmp_path / "local"
    # prr: the process reward (ROUGE to the reference reasoning) differs between random rollouts,
    # so the group has reward variance and the policy gradient is not zero.
    argv = ["--backend", "local", "--model", str(tiny), "--data", str(data), "--steps", "2", "--reward", "prr", "--config", str(config), "--out", str(out)]
    assert run_csgrpo.main(argv) == 0

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        for key in ("loss", "pg_loss", "kl", "grad_norm", "reward", "accuracy", "coverage", "calls", "reward/process"):
            assert math.isfinite(r[key]), key
        assert r["episodes"] == 3 and r["policy_tokens"] > 0
    assert rows[0]["grad_norm"] > 0
    assert rows[1]["kl"] > 0  # after one update the policy has moved away from the reference

    before = AutoModelForImageTextToText.from_pretrained(tiny).state_dict()
    after = AutoModelForImageTextToText.from_pretrained(out / "checkpoint").state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "no parameter changed"
    for step in (1, 2):
        lines = (out / "rollouts" / f"step_{step:04d}" / "trajectories.jsonl").read_text().splitlines()
        assert len(lines) == 3  # the group of G = 3 origin episodes, for the viewer


def test_a_second_run_into_the_same_folder_is_refused_resumed_or_overwritten(tmp_path, tiny, data, one_thread, capsys):
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump(FAST | {"group_size": 2}))
    out = tmp_path / "run"
    # prr: rewards differ within a group of random rollouts, so every step moves the model
    argv = ["--backend", "local", "--model", str(tiny), "--data", str(data), "--config", str(config), "--out", str(out), "--save-every", "1", "--reward", "prr"]
    assert run_csgrpo.main([*argv, "--steps", "2"]) == 0
    first = (out / "checkpoint" / "model.safetensors").read_bytes()
    capsys.readouterr()
    assert run_csgrpo.main([*argv, "--steps", "2"]) == 2  # no silent skip, no duplicate step lines
    assert "--resume" in capsys.readouterr().err

    assert run_csgrpo.main([*argv, "--steps", "3", "--resume"]) == 0
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3] and json.loads((out / "checkpoint" / "trainer_state.json").read_text()) == {"step": 3}
    assert (out / "checkpoint" / "model.safetensors").read_bytes() != first  # the third step trained from step 2's model

    assert run_csgrpo.main([*argv, "--steps", "1", "--overwrite"]) == 0
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1]
    assert not (out / "rollouts" / "step_0002").exists()


def test_a_resumed_run_trains_as_the_uninterrupted_one(tmp_path, tiny, data, one_thread):
    """Stopped after 2 steps and resumed to 3, a run ends with the weights and metrics of 3 steps in one go
    (model, optimizer state and the questions' stream continue), so a longer run can be grown from a shorter one."""
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump(FAST | {"group_size": 2}))
    argv = ["--backend", "local", "--model", str(tiny), "--data", str(data), "--config", str(config), "--save-every", "1", "--reward", "prr"]
    assert run_csgrpo.main([*argv, "--out", str(tmp_path / "whole"), "--steps", "3"]) == 0
    assert run_csgrpo.main([*argv, "--out", str(tmp_path / "grown"), "--steps", "2"]) == 0
    assert run_csgrpo.main([*argv, "--out", str(tmp_path / "grown"), "--steps", "3", "--resume"]) == 0

    def metrics(run: str) -> list[dict]:  # wall-clock times aside
        rows = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]

    assert len(metrics("whole")) == 3 and metrics("grown") == metrics("whole")
    weights = [(tmp_path / run / "checkpoint" / "model.safetensors").read_bytes() for run in ("whole", "grown")]
    assert weights[0] == weights[1]

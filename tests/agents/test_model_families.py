"""The model path for both families (Qwen2.5-VL, Qwen3-VL): sampling and training agree, checkpoints play again.

Parametrised by the `family_model_dir` fixture (tests/conftest_model.py): every test runs once
per family on its tiny offline model.
"""

from __future__ import annotations

import json

import pytest
import torch
import yaml

pytest.importorskip("verl")

from videoseek.agents.hf_policy import TransformersPolicy
from videoseek.agents.rollout import run_rollouts
from videoseek.envs.env import EnvConfig
from videoseek.envs.sample import write_jsonl
from videoseek.training.local_backend.grpo import token_logprobs
from videoseek.training.local_backend.rollout import RecordingPolicy, training_batch

ENV = {"initial_frames": 4, "frames_per_call": 4, "max_turns": 2, "max_total_frames": 8, "max_pixels": 64 * 64}


class LogprobRecorder:
    """Keeps each turn's sampled ids and the log-probs the policy reported for them."""

    def __init__(self, policy):
        self.policy, self.name = policy, policy.name
        self.turns: dict[str, list[tuple[list[int], list[float]]]] = {}

    def act(self, batch):
        outs = self.policy.act(batch)
        for item, out in zip(batch, outs):
            self.turns.setdefault(item.episode_id, []).append((list(out.token_ids), list(out.logprobs)))
        return outs


def test_training_recomputes_the_log_probs_sampling_recorded(family_model_dir, index_sample, single_thread_torch):
    """A local GRPO step's own forward (`token_logprobs`) on the episode's tokens gives back, for every
    sampled token, the log-prob the policy had when it sampled it: the same ids, frames, positions."""
    family, path = family_model_dir
    policy = TransformersPolicy(path, max_new_tokens=12, temperature=1.0, seed=3, return_logprobs=True, stop=())
    recorder = LogprobRecorder(policy)
    wrapped = RecordingPolicy(recorder)
    trajectories = run_rollouts([index_sample], wrapped, group_size=2, env_config=EnvConfig(**ENV), progress=False)
    batch = training_batch(trajectories, wrapped, policy.renderer)
    assert len(batch.episodes) == 2
    for trajectory, episode in zip(batch.trajectories, batch.episodes):
        with torch.no_grad():
            recomputed = token_logprobs(policy.model, episode, "cpu")
        positions = torch.nonzero(episode.loss_mask[1:]).flatten()
        sampled = [t for ids, _ in recorder.turns[trajectory.episode_id] for t in ids]
        recorded = torch.tensor([lp for _, lps in recorder.turns[trajectory.episode_id] for lp in lps])
        assert episode.input_ids[positions + 1].tolist() == sampled[: len(positions)]
        assert len(positions) == len(recorded) > 0
        torch.testing.assert_close(recomputed[positions], recorded, atol=2e-4, rtol=0)


def test_a_grpo_checkpoint_plays_again_as_hf_policy(family_model_dir, index_sample, tmp_path, single_thread_torch):
    from videoseek.cli import main as cli_main
    from videoseek.training import run_csgrpo

    family, path = family_model_dir
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump({"max_turn_tokens": 16, "group_size": 2, "batch_size": 1, "env": ENV}))
    out = tmp_path / "grpo"
    argv = ["--backend", "local", "--model", str(path), "--data", str(data), "--steps", "1", "--reward", "prr", "--config", str(config), "--out", str(out)]
    assert run_csgrpo.main(argv) == 0
    checkpoint = out / "checkpoint"
    assert json.loads((checkpoint / "config.json").read_text())["model_type"] == json.loads((path / "config.json").read_text())["model_type"]
    run = tmp_path / "replay"
    assert cli_main(["rollout", "--data", str(data), "--policy", f"hf:{checkpoint}", "--out", str(run), "--max-new-tokens", "16"]) == 0
    rows = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert rows and all(r["failure"] is None for r in rows)

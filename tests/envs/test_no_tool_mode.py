"""The no-tool baseline: `EnvConfig(tools=False)` / `videoseek rollout --no-tools --frames N` plays
one turn with N uniformly sampled frames, and model policies render the prompt without the
crop_video schema (the same model answering from sparse frames only)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from videoseek.agents.policy import Message
from videoseek.envs.trajectory import read_trajectories
from videoseek.cli import main
from videoseek.envs.actions import CropVideo
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.protocol import NO_TOOL_SYSTEM_PROMPT, SYSTEM_PROMPT
from videoseek.envs.sample import write_jsonl


def test_env_without_tools_gives_no_tool_instructions_and_refuses_crops(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=False, initial_frames=5, max_turns=2))
    obs, info = env.reset(seed=0)
    assert info["tools"] == [] and info["instructions"] == NO_TOOL_SYSTEM_PROMPT
    assert "crop_video" not in NO_TOOL_SYSTEM_PROMPT and "<answer>" in NO_TOOL_SYSTEM_PROMPT
    assert np.allclose(obs["timestamps"], (np.arange(5) + 0.5) * 20 / 5, atol=0.1)  # uniform over the 20 s video
    obs, _, terminated, truncated, info = env.step(CropVideo(1.0, 3.0))
    assert "not available" in info["error"] and len(obs["frames"]) == 0 and not terminated
    _, info = VideoSeekEnv(index_sample).reset(seed=0)
    assert info["instructions"] == SYSTEM_PROMPT and info["tools"][0]["function"]["name"] == "crop_video"


def test_rollout_no_tools_scripted(index_sample, tmp_path, capsys):
    data = write_jsonl([index_sample], tmp_path / "data" / "samples.jsonl")
    assert main(["rollout", "--data", str(data), "--policy", "no-tool", "--no-tools", "--frames", "4", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    (t,) = read_trajectories(tmp_path / "run")
    assert len(t.initial.frames) == 4 and len(t.turns) == 1 and t.terminated
    env = json.loads((tmp_path / "run" / "run.json").read_text())["env"]
    assert env["tools"] == [] and env["max_turns"] == 1 and env["initial_frames"] == 4
    # a scripted policy that crops by design is refused, with one line
    assert main(["rollout", "--data", str(data), "--policy", "oracle", "--no-tools", "--out", str(tmp_path / "r2")]) == 2
    assert "crops by design" in capsys.readouterr().err


def test_rollout_no_tools_with_the_tiny_model(tiny_model_dir, index_sample, tmp_path, monkeypatch):
    from videoseek.agents import prompting

    rendered_texts: list[str] = []
    output = prompting.RenderState.output

    def spy(self, add_generation_prompt=True):  # every render ends here, whole or extended turn by turn
        out = output(self, add_generation_prompt)
        rendered_texts.append(out["text"])
        return out

    monkeypatch.setattr(prompting.RenderState, "output", spy)
    data = write_jsonl([index_sample], tmp_path / "data" / "samples.jsonl")
    argv = ["rollout", "--data", str(data), "--policy", f"hf:{tiny_model_dir}", "--max-new-tokens", "6", "--no-progress"]
    assert main([*argv, "--no-tools", "--frames", "3", "--out", str(tmp_path / "without")]) in (0, 1)
    (t,) = read_trajectories(tmp_path / "without")
    assert t.failure is None and len(t.turns) == 1 and len(t.initial.frames) == 3
    prompt = rendered_texts[-1]
    assert "<tools>" not in prompt and "crop_video" not in prompt and "uniformly from the whole video" in prompt
    assert main([*argv, "--max-turns", "1", "--out", str(tmp_path / "with")]) in (0, 1)
    assert "<tools>" in rendered_texts[-1] and "crop_video" in rendered_texts[-1]


def test_policy_without_tools_renders_no_schema(tiny_model_dir):
    policy = hf_policy_no_tools(tiny_model_dir)
    text = policy.renderer.render([Message("system", NO_TOOL_SYSTEM_PROMPT), Message("user", "Question?")])["text"]
    assert "<tools>" not in text and "# Tools" not in text


def hf_policy_no_tools(path):
    from videoseek.agents.hf_policy import TransformersPolicy

    return TransformersPolicy(path, max_new_tokens=2, tools=False)


@pytest.mark.parametrize("argv", [["--frames", "0"], ["--no-tools", "--max-turns", "3"]])
def test_bad_no_tool_flags_are_one_line(index_sample, tmp_path, capsys, argv):
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    assert main(["rollout", "--data", str(data), "--policy", "no-tool", "--out", str(tmp_path / "run"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("--frames" in err[0] or "--max-turns" in err[0])

"""Real env episodes and the agent-loop record `compute_score` reads, shared by the reward-function tests."""

from __future__ import annotations

from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.rewards import RewardConfig
from videoseek.training.verl_plugin.records import EXTRA_KEY, loop_call_fields, sample_to_json, summary_to_dict

CALL = '<think>look</think><tool_call>{"name": "crop_video", "arguments": {"start": 11.5, "end": 14.0}}</tool_call>'


def play(sample, turns, preset="csgrpo", tools=None):
    """The env's episode of `turns` (4 initial frames, 4 a call); `tools`: the env's tools (default ones when None)."""
    config = EnvConfig(initial_frames=4, frames_per_call=4, reward=RewardConfig(preset=preset))
    env = VideoSeekEnv(sample, config if tools is None else config.model_copy(update={"tools": list(tools)}))
    env.reset(seed=0)
    for text in turns:
        _, reward, terminated, truncated, _ = env.step(text)
        if terminated or truncated:
            break
    return env, reward


def extra_info_for(sample, env, preset="csgrpo", **record):
    base = {
        "reward_preset": preset,
        "reward_config": RewardConfig(preset=preset).model_dump(mode="json"),
        "episode": summary_to_dict(env.summary()),
        **loop_call_fields(env.trajectory, list(env.tools)),  # the calls per tool, the tools and the facts, as the loop records them
        "evidence": env.evidence.snapshot(),
        "failure": None,
        "group_reward": None,
    }
    return {"index": 0, "sample": sample_to_json(sample), EXTRA_KEY: {**base, **record}}

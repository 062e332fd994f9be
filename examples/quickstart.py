"""Quick start: one VideoSeek episode by hand, then a group of scripted rollouts.

    python examples/quickstart.py [OUT_DIR]

Offline: it synthesizes two seek-worthy videos first.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from videoseek.agents.evaluate import summarize
from videoseek.agents.policy import load_policy
from videoseek.agents.rollout import run_rollouts
from videoseek.envs import EnvConfig, VideoSeekEnv
from videoseek.envs.synth import generate_dataset


def main(out: Path) -> None:
    samples = generate_dataset(out / "data", n=2, seed=0, max_duration=30)
    sample = samples[0]

    # 1. One episode, step by step: look at the clue, then answer.
    # csgrpo is the default preset (any preset name or a RewardConfig); tools: crop_video (the default) and zoom.
    env = VideoSeekEnv(sample, EnvConfig(reward="csgrpo", tools=["crop_video", "zoom"]))
    obs, info = env.reset(seed=0)
    print(info["instructions"].splitlines()[0])  # the system prompt; info["tools"] holds the tools' schemas
    print("tools:", [t["function"]["name"] for t in info["tools"]])
    print(obs["text"])
    print(f"sparse frames: {obs['frames'].shape} at {obs['timestamps'].round(1).tolist()}")
    start, end = sample.clue_intervals[0]
    obs, reward, terminated, truncated, info = env.step(
        "<think>The sparse frames miss the moment.</think>"
        f'<tool_call>{{"name": "crop_video", "arguments": {{"start": {start}, "end": {end}}}}}</tool_call>'
    )
    print(obs["text"], "| evidence:", {k: round(v, 2) for k, v in info["evidence"].items()})
    obs, reward, terminated, truncated, info = env.step(  # a closer look at the middle of the frame, at native resolution
        f'<tool_call>{{"name": "zoom", "arguments": {{"time": {(start + end) / 2}, "box": [0.25, 0.25, 0.75, 0.75]}}}}</tool_call>'
    )
    print(obs["text"])
    obs, reward, terminated, truncated, info = env.step(f"<think>I saw it.</think><answer>{sample.answer}</answer>")
    print(f"reward {reward:.3f}", {k: round(v, 3) for k, v in info["reward_components"].items()})

    # 2. A group of G = 4 scripted episodes per sample, with the DM-GRPO masked group, written for the viewer.
    trajectories = run_rollouts(samples, load_policy("oracle"), group_size=4, env_config=EnvConfig(reward="dmgrpo"),
                                out_dir=out / "run", progress=False)  # fmt: skip
    metrics = summarize(trajectories)
    print(f"oracle: accuracy {metrics['accuracy']:.2f}, coverage {metrics['coverage']:.2f}, episodes {len(trajectories)}")
    print(f"replay: videoseek view {out / 'run'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="videoseek-quickstart-")))

"""`VideoSeekTRLEnv`: a `VideoSeekEnv` episode as TRL's `GRPOTrainer(environment_factory=...)` plays it.

What TRL 1.16 does with such a class (`trl/trainer/grpo_trainer.py`), and how this one fits:

- Every public method other than `reset` and `get_reward` becomes a tool, its JSON schema built
  from the type hints and the Google-style docstring; so the only public method is
  `crop_video(start, end)`, whose schema equals the env's `CROP_VIDEO_TOOL`.
- Instances are pooled and reused across batches: `reset(**row)` builds a fresh `VideoSeekEnv`
  from the row, so nothing of an earlier episode survives; it accepts the row's `prompt`.
- `reset` returns the question and the sparse frames as content blocks, which TRL appends to the
  prompt's last user turn; `crop_video` returns the crop's frames as image blocks, each after its
  time ("Frame at 12.5s: "), laid out as the renderer lays out a tool turn in images mode
  (`agents.prompting.frames_content`, `lay_out`). TRL collects only image blocks from tool
  results, so frames travel as images, not as one video (docs/training.md says what that loses).
- A tool call is stepped through the env as the Hermes text the protocol defines, so the env's
  parser (`envs/actions.py`) judges the arguments: a bad value ("abc", start >= end, a span
  outside the video) is an error observation that costs a turn, never an exception in the trainer.
- TRL never shows the final answer to the environment (`get_reward()` takes no arguments), so the
  episode is finished by the reward function (`rewards.videoseek_reward`), which steps the env
  with the last assistant turn and reads the env's reward.

Group presets (dmgrpo, tgrpo, sfgrpo: perturbed groups; processthinker: continuations) need the
group engine (`agents/groups.py`), which TRL's one-environment-per-rollout contract cannot run:
they are refused at construction.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from PIL import Image

from videoseek.agents.groups import score_origin_group
from videoseek.agents.prompting import frames_content, lay_out
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.integrations.trl.dataset import sample_from_row
from videoseek.training.exports.verl_parquet import defang_for_verl

ENDED_TEXT = "The episode has ended (turn budget spent); no frames. Give your final answer in <answer></answer>."


def observation_blocks(role: str, obs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An env observation as chat content blocks: text, and one PIL image per frame after its time.

    The text is defanged (`<|...|>` spellings broken), so no text can add a vision placeholder
    without an image behind it.
    """
    text = {"type": "text", "text": defang_for_verl(obs["text"])}
    frames, timestamps = obs["frames"], np.asarray(obs["timestamps"], dtype=np.float64)
    if len(frames) == 0:
        return [text]
    images = iter(Image.fromarray(np.ascontiguousarray(f)) for f in frames)
    items = [{"type": "image", "image": next(images)} if item["type"] == "image" else item for item in frames_content(timestamps, "images")]
    return lay_out(role, text, items)


def group_preset_reason(config: EnvConfig) -> str | None:
    """Why `config`'s reward cannot be formed one episode at a time, or None."""
    reward = config.reward
    if reward.group_kinds():
        return f"reward preset {reward.preset!r} needs perturbed groups ({', '.join(reward.group_kinds())})"
    if "process_thinker" in reward.component_weights():
        return f"reward preset {reward.preset!r} needs continuations of each step prefix"
    return None


class VideoSeekTRLEnv:
    """One VideoSeek episode per rollout of TRL's `GRPOTrainer` (see the module docstring).

    Args:
        config: the `EnvConfig` of every episode (frame budgets, turns, reward preset).
    """

    def __init__(self, config: EnvConfig | None = None) -> None:
        self._config = config or EnvConfig()
        reason = group_preset_reason(self._config)
        if reason:
            raise ValueError(f"{reason}: the group engine runs in `videoseek rollout`, the local backend and VideoSeekAgentLoop, not in TRL")
        self._env: VideoSeekEnv | None = None
        self._ended = False
        self._result: tuple[float, dict[str, float]] | None = None
        self.frames_returned = 0  # frames the episode has shown the model, initial ones included

    @property
    def env(self) -> VideoSeekEnv | None:
        """The episode's `VideoSeekEnv` (its `trajectory` is the viewer's record)."""
        return self._env

    @property
    def result(self) -> tuple[float, dict[str, float]] | None:
        """(reward, components) once the reward function has finished the episode, else None."""
        return self._result

    def reset(self, prompt: Any = None, **row: Any) -> list[dict[str, Any]]:
        """Start the episode of the dataset row (a `VideoSample`'s fields); returns the question and frames."""
        self._env, self._ended, self._result, self.frames_returned = None, False, None, 0
        env = VideoSeekEnv(sample_from_row(row), self._config)
        obs, _ = env.reset(seed=0)
        self._env = env
        self.frames_returned = len(obs["frames"])
        return observation_blocks("user", obs)

    def crop_video(self, start: float, end: float):  # no return hint: its schema would gain a "return" entry
        """Return frames from the time span [start, end] of the video, with their timestamps. Use it to look closer at the moment that answers the question.

        Args:
            start: start of the span, in seconds from the beginning of the video
            end: end of the span, in seconds; greater than start
        """
        if self._env is None:
            return [{"type": "text", "text": "Error: no episode (reset was not called)."}]
        if self._ended:
            return [{"type": "text", "text": ENDED_TEXT}]
        call = {"name": "crop_video", "arguments": {"start": start, "end": end}}
        obs, _, terminated, truncated, _ = self._env.step(f"<tool_call>{json.dumps(call, default=str)}</tool_call>")
        self._ended = terminated or truncated
        self.frames_returned += len(obs["frames"])
        return observation_blocks("tool", obs)

    def _finish(self, final_text: str | None) -> tuple[float, dict[str, float]]:
        """Step the env with the rollout's last assistant turn (None: it ended on a tool call TRL
        did not run) and return the env's (reward, components). A rollout that ends without an
        answer (no `<answer>`, TRL's completion budget, a tool result TRL rolled back) is scored as
        truncated, as `VideoSeekAgentLoop` scores an episode its response budget ends."""
        if self._result is not None:
            return self._result
        env = self._env
        if env is None:
            raise RuntimeError("reward requested for an environment that was never reset")
        if not self._ended and final_text is not None:
            _, _, terminated, truncated, _ = env.step(final_text)
            self._ended = terminated or truncated
        traj = env.trajectory
        if self._ended:
            self._result = (float(traj.reward), dict(traj.reward_components))
        else:
            summary = dataclasses.replace(env.summary(), truncated=True)
            scores, _ = score_origin_group(env.sample, [summary], {}, self._config.reward)
            traj.truncated, (traj.reward, traj.reward_components) = True, scores[0]
            traj.metrics["ended_by"] = "trl"
            self._result = scores[0]
        return self._result


def environment_factory(config: EnvConfig | None = None) -> Callable[[], VideoSeekTRLEnv]:
    """The `environment_factory` for `GRPOTrainer`: a new `VideoSeekTRLEnv(config)` per call."""
    config = config or EnvConfig()
    VideoSeekTRLEnv(config)  # refuse a group preset here, not when TRL first builds one

    def factory() -> VideoSeekTRLEnv:
        return VideoSeekTRLEnv(config)

    return factory

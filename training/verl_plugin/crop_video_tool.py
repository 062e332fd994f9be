"""`CropVideoTool`: `crop_video` as a `BaseTool` for verl's stock `ToolAgentLoop`, frames as images.

For users who keep verl's own multi-turn loop (`agent_name: tool_agent`) rather than
`VideoSeekAgentLoop`. Load it with the ready tool config `training/configs/tools/crop_video_tool.yaml`
(`actor_rollout_ref.rollout.multi_turn.tool_config_path`); rows from `videoseek export-verl
--agent tool_agent` carry the sample in `extra_info.tools_kwargs.crop_video.create_kwargs.sample`
(a JSON string).

How verl 0.9.1's `ToolAgentLoop._call_tool` uses a tool, and what follows here:

- It calls `create(create_kwargs=...)`, `execute(instance_id, arguments, agent_data=...)` and
  `release(instance_id)` around every single call, so the tool holds no episode state. Each call
  plays one crop through `VideoSeekEnv` (its parser judges the arguments, it clips the span,
  decodes the frames and states their times); the episode's calls so far are kept, as plain data,
  in `agent_data.extra_fields["videoseek_tool"]` (which verl hands to `compute_score` inside
  `extra_info`), where the call budget and `compute_score`'s clue-seek reward read them.
- It raises `NotImplementedError` for a tool that returns video, so the frames come back as
  images (`ToolResponse.image`), one per frame: the model sees each frame's time as text only
  (Qwen2.5-VL positions images without the clip's time spacing; Qwen3-VL writes no
  `<t seconds>` for images). docs/training.md, "Three ways to train", compares the paths.
- It cuts a tool's text beyond `rollout.multi_turn.max_tool_response_length` (256 characters by
  default); the text here fits in `max_text` (256) whatever the crop: the span and every frame
  time when they fit, else the span, the count and the spacing.
- A malformed call (bad JSON, an unknown argument, start >= end, a span outside the video) is an
  error text and costs a turn; nothing is raised into the loop.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import numpy as np
from PIL import Image
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.protocol import CROP_VIDEO_TOOL
from videoseek.envs.sample import DataError
from videoseek.training.verl_plugin.records import TOOL_KEY, sample_from_extra_info
MAX_TEXT = 256  # verl's default rollout.multi_turn.max_tool_response_length


def short_times(timestamps: np.ndarray) -> str:
    return ", ".join(f"{t:.1f}" for t in timestamps)


def tool_text(obs_text: str, timestamps: np.ndarray, span: tuple[float, float] | None, max_text: int = MAX_TEXT) -> str:
    """The tool's text within `max_text` characters: the env's own when it fits, else the frames' times, else their spacing."""
    if len(obs_text) <= max_text:
        return obs_text
    if span is None:  # an error: keep its first words
        return obs_text[: max_text - 1] + "…"
    head = f"crop_video returned {len(timestamps)} frames from {span[0]:.1f}s to {span[1]:.1f}s"
    listed = f"{head} at {short_times(timestamps)}s."
    if len(listed) <= max_text:
        return listed
    step = float(np.mean(np.diff(timestamps))) if len(timestamps) > 1 else 0.0
    return f"{head}, one every {step:.2f}s from {timestamps[0]:.1f}s to {timestamps[-1]:.1f}s."


class CropVideoTool(BaseTool):
    """verl `BaseTool` for `crop_video(start, end)` (see the module docstring).

    `config` (the tool config's `config:` block): `type: native`, and `env`: `EnvConfig` fields
    (`frames_per_call`, `max_pixels`, `max_turns` (the call budget), `max_total_frames` (the
    crops' frame budget), `min_span`, `timestamp_overlay`, `video_backend`); `max_text` (default 256).
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        env = dict(config.get("env") or {})
        # The tool only crops: the sparse frames are the row's own (export-verl's `videos`).
        self.env_config = EnvConfig(**{**env, "initial_frames": 0})
        self.max_text = int(config.get("max_text", MAX_TEXT))
        self._samples: dict[str, Any] = {}
        super().__init__(config, tool_schema)

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return OpenAIFunctionToolSchema.model_validate(CROP_VIDEO_TOOL)

    async def create(self, instance_id: str | None = None, create_kwargs: dict | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Bind an instance to the row's sample (`create_kwargs["sample"]`); DataError naming the field if it is missing or bad."""
        instance_id = instance_id or str(uuid4())
        try:
            self._samples[instance_id] = sample_from_extra_info(create_kwargs or {})
        except DataError as exc:
            raise DataError(f"extra_info.tools_kwargs.crop_video.create_kwargs.{str(exc).removeprefix('extra_info.')}") from None
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        """One crop through `VideoSeekEnv`: (frames as images and their times, 0.0, metrics)."""
        agent_data = kwargs.get("agent_data")
        record = self._record(agent_data)
        calls = len(record["calls"]) + record["invalid_calls"]
        if calls >= self.env_config.max_turns:
            return ToolResponse(text=f"Error: the call budget ({self.env_config.max_turns}) is spent. Give your final answer in <answer></answer>."), 0.0, {"budget_spent": 1.0}
        # The episode's frame budget (`max_total_frames`, crops only) is what the calls so far left.
        left = max(0, self.env_config.max_total_frames - record["frames"])
        # initial_frames 0: the loop already showed the sparse frames; a reset here decodes none of them again.
        config = self.env_config.model_copy(update={"max_total_frames": left, "initial_frames": 0})
        env = VideoSeekEnv(self._samples[instance_id], config)
        env.reset(seed=0)
        call = {"name": "crop_video", "arguments": parameters if isinstance(parameters, dict) else {}}
        obs, _, _, _, info = env.step(f"<tool_call>{json.dumps(call, default=str)}</tool_call>")
        frames, timestamps = obs["frames"], np.asarray(obs["timestamps"], dtype=np.float64)
        turn = env.trajectory.turns[-1]
        span = (turn.call.start, turn.call.end) if turn.call is not None else None
        if span is None:
            record["invalid_calls"] += 1
        else:
            record["calls"].append([float(span[0]), float(span[1])])
            record["frames"] += len(frames)
        text = tool_text(obs["text"], timestamps, span, self.max_text)
        images = [Image.fromarray(np.ascontiguousarray(f)) for f in frames]
        metrics = {"frames": float(len(frames)), "invalid": float(span is None)}
        response = ToolResponse(text=text, image=images) if images else ToolResponse(text=text)  # image=None is refused
        return response, 0.0, metrics

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._samples.pop(instance_id, None)

    @staticmethod
    def _record(agent_data: Any) -> dict[str, Any]:
        """The episode's calls so far, kept in the loop's per-trajectory `extra_fields` (a fresh record without one)."""
        fields = getattr(agent_data, "extra_fields", None)
        if fields is None:
            return {"calls": [], "invalid_calls": 0, "frames": 0}
        return fields.setdefault(TOOL_KEY, {"calls": [], "invalid_calls": 0, "frames": 0})

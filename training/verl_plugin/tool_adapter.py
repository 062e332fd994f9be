"""`VideoSeekTool`: any VideoSeek tool as a `BaseTool` for verl's stock `ToolAgentLoop`, frames as images.

For users who keep verl's own multi-turn loop (`agent_name: tool_agent`) rather than
`VideoSeekAgentLoop`. One class serves every registered tool (`videoseek.envs.tools`): each entry
of the tool config names its tool in `config.tool` (a registered name or an import path
"package.module:Class" / "path/to/file.py:Class"), and the schema verl shows the model is that
tool's own (`Tool.schema()`). The ready configs: `training/configs/tools/crop_video_tool.yaml` (the
default tools) and `training/configs/tools/crop_video_zoom.yaml` (two tools); load one with
`actor_rollout_ref.rollout.multi_turn.tool_config_path`. Rows from `videoseek export-verl --agent
tool_agent --tools ...` carry the sample in `extra_info.tools_kwargs.<tool>.create_kwargs.sample`
(a JSON string) for each tool.

How verl 0.9.1's `ToolAgentLoop._call_tool` uses a tool, and what follows here:

- It calls `create(create_kwargs=...)`, `execute(instance_id, arguments, agent_data=...)` and
  `release(instance_id)` around every single call, so the tool holds no episode state. Each call
  is played through a `VideoSeekEnv` with this one tool (it checks the arguments against the
  schema, runs the tool, reads the frames through the env, so clipping, the frame budget and the
  pixel budget are the env's); the episode's calls so far are kept, as plain data, in
  `agent_data.extra_fields["videoseek_tool"]` (`records.new_tool_record`; verl hands it to
  `compute_score` inside `extra_info`), which every tool's adapter of the episode shares: the call
  budget and the frame budget span the tools, and `compute_score`'s rewards read the calls.
- It raises `NotImplementedError` for a tool that returns video, so the frames come back as
  images (`ToolResponse.image`), one per frame: the model sees each frame's time as text only
  (Qwen2.5-VL positions images without the clip's time spacing; Qwen3-VL writes no
  `<t seconds>` for images). `VideoSeekAgentLoop` gives each tool turn's frames as one video
  instead; docs/training.md, "Three ways to train", compares the paths.
- It shows the model each tool's schema as `tool_schema.model_dump(...)`. verl's
  `OpenAIFunctionToolSchema` keeps only `type`, `description` and `enum` of a parameter, which
  would drop, say, zoom's `items`/`minItems`/`maxItems` (a box is 4 numbers); the schema here is
  that model with every other JSON-schema keyword kept (`FullToolSchema`), so the model reads the
  same schema as on `VideoSeekAgentLoop` and in a local rollout.
- It cuts a tool's text beyond `rollout.multi_turn.max_tool_response_length` (256 characters by
  default); the text here fits in `max_text` (256) whatever the call (`tool_text`): the env's own
  when it fits, else the frame times, else their count and spacing.
- A call the env rejects (bad arguments, a `ToolError`, a spent frame budget) is an error text and
  costs a turn; nothing is raised into the loop. verl itself answers a call of a tool that is not
  in the config, or with arguments that are not JSON, without calling any adapter.
- The reward extras' tool-use numbers (`videoseek.envs.metrics`) are made from this record and the
  decoded turns (`records.tool_record_facts`): verl's parser ran the calls, so the env's parser
  reads the turns after the fact for repairs and for the calls no adapter saw.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import numpy as np
from PIL import Image
from pydantic import ConfigDict, Field
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import (
    OpenAIFunctionParametersSchema,
    OpenAIFunctionPropertySchema,
    OpenAIFunctionSchema,
    OpenAIFunctionToolSchema,
    ToolResponse,
)

from videoseek.envs.actions import ToolCall
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.sample import DataError
from videoseek.envs.tools import Tool, format_times, get_tool
from videoseek.training.verl_plugin.records import TOOL_KEY, new_tool_record, sample_from_extra_info

MAX_TEXT = 256  # verl's default rollout.multi_turn.max_tool_response_length


# verl's schema models, with the JSON-schema keywords they do not declare kept (see the module docstring).
class _Property(OpenAIFunctionPropertySchema):
    model_config = ConfigDict(extra="allow")
    type: str | list[str] | None = None  # a property may be an `anyOf` instead


class _Parameters(OpenAIFunctionParametersSchema):
    model_config = ConfigDict(extra="allow")
    properties: dict[str, _Property] = Field(default_factory=dict)


class _Function(OpenAIFunctionSchema):
    model_config = ConfigDict(extra="allow")
    parameters: _Parameters = Field(default_factory=lambda: _Parameters(type="object"))


class FullToolSchema(OpenAIFunctionToolSchema):
    """verl's `OpenAIFunctionToolSchema` that dumps a tool's schema whole (`Tool.schema()`)."""

    model_config = ConfigDict(extra="allow")
    function: _Function


def tool_text(name: str, obs_text: str, timestamps: np.ndarray, span: tuple[float, float] | None = None, max_text: int = MAX_TEXT) -> str:
    """The text of a call of tool `name` within `max_text` characters: the env's own when it fits, else
    the frames' times, else their count and spacing (`span`: the time span the call retrieved, if any)."""
    if len(obs_text) <= max_text:
        return obs_text
    if not len(timestamps):  # an error or a text-only result: keep its first words
        return obs_text[: max_text - 1] + "…"
    head = f"{name} returned {len(timestamps)} frame{'s' if len(timestamps) > 1 else ''}"
    if span is not None:
        head += f" from {span[0]:.1f}s to {span[1]:.1f}s"
    listed = f"{head} at {format_times(timestamps)}."
    if len(listed) <= max_text:
        return listed
    step = float(np.mean(np.diff(timestamps))) if len(timestamps) > 1 else 0.0
    return f"{head}, one every {step:.2f}s from {timestamps[0]:.1f}s to {timestamps[-1]:.1f}s."[:max_text]


class VideoSeekTool(BaseTool):
    """verl `BaseTool` for one VideoSeek tool (see the module docstring).

    `config` (the tool config's `config:` block): `type: native`; `tool`: the tool's registered
    name or import path; `env`: `EnvConfig` fields (`frames_per_call`, `max_pixels`, `max_turns`
    (the call budget of the episode, all tools together), `max_total_frames` (the calls' frame
    budget), `min_span`, `timestamp_overlay`, `video_backend`); `max_text` (default 256). A
    `tool_schema` given in the YAML must name the same tool (verl dispatches calls by that name).
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        spec = config.get("tool")
        if not spec:
            raise ValueError("VideoSeekTool config needs `tool`: a registered VideoSeek tool name or an import path 'package.module:Class'")
        self.tool: type[Tool] = get_tool(str(spec))  # ValueError naming an unknown tool
        env = {k: v for k, v in dict(config.get("env") or {}).items() if k != "tools"}
        # The tool plays calls only: the sparse frames are the row's own (export-verl's `videos`).
        self.env_config = EnvConfig(**{**env, "initial_frames": 0, "tools": [str(spec)]})
        self.max_text = int(config.get("max_text", MAX_TEXT))
        self._samples: dict[str, Any] = {}
        super().__init__(config, tool_schema)
        if self.name != self.tool.name:
            raise ValueError(f"VideoSeekTool: the tool_schema names {self.name!r} but config.tool is {self.tool.name!r}")

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return FullToolSchema.model_validate(self.tool.schema())

    async def create(self, instance_id: str | None = None, create_kwargs: dict | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Bind an instance to the row's sample (`create_kwargs["sample"]`); DataError naming the field if it is missing or bad."""
        instance_id = instance_id or str(uuid4())
        try:
            self._samples[instance_id] = sample_from_extra_info(create_kwargs or {})
        except DataError as exc:
            raise DataError(f"extra_info.tools_kwargs.{self.name}.create_kwargs.{str(exc).removeprefix('extra_info.')}") from None
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        """One call through `VideoSeekEnv`: (frames as images and the text, 0.0, metrics)."""
        record = self._record(kwargs.get("agent_data"))
        if sum(record["tool_calls"].values()) + record["invalid_calls"] >= self.env_config.max_turns:
            return ToolResponse(text=f"Error: the call budget ({self.env_config.max_turns}) is spent. Give your final answer in <answer></answer>."), 0.0, {"budget_spent": 1.0}
        # The episode's frame budget (`max_total_frames`, calls only) is what the calls so far left;
        # initial_frames 0: the loop already showed the sparse frames, a reset here decodes none.
        config = self.env_config.model_copy(update={"max_total_frames": max(0, self.env_config.max_total_frames - record["frames"])})
        env = VideoSeekEnv(self._samples[instance_id], config)
        env.reset(seed=0)
        obs, _, _, _, _ = env.step(ToolCall(self.name, parameters))
        frames, timestamps = obs["frames"], np.asarray(obs["timestamps"], dtype=np.float64)
        call = env.trajectory.turns[-1].call
        if call is None:
            record["invalid_calls"] += 1
        else:
            record["tool_calls"][call.tool] = record["tool_calls"].get(call.tool, 0) + 1
            if call.span is not None:
                record["calls"].append([float(call.start), float(call.end)])
                record["call_frames"].append([float(t) for t in timestamps])
            if call.box is not None:
                record["zooms"].append([float(call.time), [float(v) for v in call.box]])
            record["frames"] += len(frames)
        text = tool_text(self.name, obs["text"], timestamps, call.span if call is not None else None, self.max_text)
        images = [Image.fromarray(np.ascontiguousarray(f)) for f in frames]
        metrics = {"frames": float(len(frames)), "invalid": float(call is None)}
        response = ToolResponse(text=text, image=images) if images else ToolResponse(text=text)  # image=None is refused
        return response, 0.0, metrics

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._samples.pop(instance_id, None)

    @staticmethod
    def _record(agent_data: Any) -> dict[str, Any]:
        """The episode's calls so far, kept in the loop's per-trajectory `extra_fields` (a fresh record without one)."""
        fields = getattr(agent_data, "extra_fields", None)
        if fields is None:
            return new_tool_record()
        return fields.setdefault(TOOL_KEY, new_tool_record())

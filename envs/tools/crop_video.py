"""`crop_video(start, end)`: frames of a time span, the first built-in tool (Open-o3-Video-v2, seed 003).

The agent names a span of the video in seconds; the tool returns up to `EnvConfig.frames_per_call`
frames evenly spread over it (each frame once: a short span of a low-fps video maps several times
to one frame), with their times. The span is clipped to the video, and its retrieved interval is
the temporal evidence of CS-GRPO's clue-seek reward (`ToolResult.span`). The parser's lenient
dialects (`<retrieve>s, e</retrieve>`, `\\boxed{[s, e]}`, "MM:SS" times, `start_time`/`end_time`
keys) are this tool's (`videoseek.envs.actions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from videoseek.envs.tools.base import Tool, ToolError, ToolResult, format_times, register_tool

if TYPE_CHECKING:
    from videoseek.envs.env import VideoSeekEnv


@register_tool
class CropVideoTool(Tool):
    name = "crop_video"
    description = (
        "Return frames from the time span [start, end] of the video, with their timestamps. "
        "Use it to look closer at the moment that answers the question."
    )
    parameters = {
        "type": "object",
        "properties": {
            "start": {"type": "number", "description": "start of the span, in seconds from the beginning of the video"},
            "end": {"type": "number", "description": "end of the span, in seconds; greater than start"},
        },
        "required": ["start", "end"],
    }
    prompt = "You can look closer at any part of the video with the crop_video tool: it returns frames from the time span you ask for, with their times."
    action = "look closer at a time span"
    example = {"start": 12.0, "end": 18.5}
    usage = '{"start": <seconds>, "end": <seconds>}'
    rules = "Times are seconds from the start of the video; start must be smaller than end and the span must lie inside the video."
    advice = "Call the tool at most once per turn, and only for spans you still need: short crops that cover where the answer is visible help, repeated or irrelevant crops are penalised."

    def run(self, env: VideoSeekEnv, start: float, end: float, **_: Any) -> ToolResult:
        s, e = float(start), float(end)
        if s >= e:
            raise ToolError(f"crop_video needs start < end, got start={s:g}, end={e:g}")
        if e <= 0 or s >= env.duration:
            raise ToolError(f"crop_video span {s:g}-{e:g}s lies outside the video (0-{env.duration:.1f}s)")
        span = (max(s, 0.0), min(e, env.duration))
        if span[1] - span[0] < env.config.min_span:
            raise ToolError(f"crop_video span of {span[1] - span[0]:.2f}s is shorter than the minimum {env.config.min_span:g}s")
        k = min(env.config.frames_per_call, env.frames_left)
        times = span[0] + (np.arange(k) + 0.5) * (span[1] - span[0]) / k
        frames, ts = env.read_frames(times, distinct=True)
        clipped = span != (s, e)
        note = f" (clipped to the video: requested {s:.1f}-{e:.1f}s)" if clipped else ""
        text = f"crop_video returned {len(ts)} frames from {span[0]:.1f}s to {span[1]:.1f}s{note} at {format_times(ts)}."
        return ToolResult(text, frames, ts, arguments={"start": span[0], "end": span[1]}, span=span, clipped=clipped)

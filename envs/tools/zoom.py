"""`zoom(time, box)`: one frame's region at the source's resolution, the second built-in tool.

Image agents zoom into regions (DeepEyes' `image_zoom_in_tool(bbox_2d)`, Mini-o3); LongVT's MCP
server sketches `video_zoom_in_tool(timestamp_sec, bbox_2d)`. Here the region is cut from the frame
shown at `time`, decoded at native resolution, and resized (aspect ratio kept) to at most the env's
`max_pixels`, and to at least 32 px a side (`video.fit_region`: Qwen-VL refuses smaller images): a region covering 5 % of a 1280x720 frame comes back with about 20
times the pixels it has in the ordinary 224x224-budget frames, so small text becomes legible.

`box` is [x1, y1, x2, y2] in fractions of the frame's width and height, the convention of
`VideoSample.key_frames`. A box partly outside [0, 1] is clipped (recorded: `clipped`); x1 >= x2,
y1 >= y2, a box entirely outside the frame, or a time outside the video is rejected. The zoomed
frame counts against the frame budget, a DM-GRPO mask applies to it when its time is masked, and
its box is the call's spatial evidence (`ToolResult.region`: IoU with the key-frame boxes near that
time, `EvidenceState.add_region`).

How the frame reaches the model: as a one-frame video, like every other tool result. Qwen-VL
repeats an image to its temporal patch size anyway, so the tokens are the same as an image's, and a
video keeps the frame's time where the model reads times (Qwen2.5-VL's positions, Qwen3-VL's
`<t seconds>`); the renderer, verl's `multi_modal_data` and training then lay out every tool turn
one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from videoseek.envs.tools.base import Tool, ToolError, ToolResult, format_times, register_tool

if TYPE_CHECKING:
    from videoseek.envs.env import VideoSeekEnv


@register_tool
class ZoomTool(Tool):
    name = "zoom"
    description = (
        "Return one frame of the video at full resolution, cropped to a region: the frame shown at `time`, "
        "inside `box` = [x1, y1, x2, y2] in fractions of the frame's width and height (0 to 1). "
        "Use it to read small text or see small objects."
    )
    parameters = {
        "type": "object",
        "properties": {
            "time": {"type": "number", "description": "the frame's time, in seconds from the beginning of the video"},
            "box": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 4,
                "maxItems": 4,
                "description": "[x1, y1, x2, y2]: left, top, right, bottom as fractions of the frame's width and height",
            },
        },
        "required": ["time", "box"],
    }
    prompt = "You can zoom into a region of one frame with the zoom tool: it returns that region at full resolution."
    action = "zoom into a region of the frame at a time"
    example = {"time": 12.5, "box": [0.25, 0.25, 0.5, 0.5]}
    usage = '{"time": <seconds>, "box": [x1, y1, x2, y2]}'
    rules = "A box is [x1, y1, x2, y2] in fractions of the frame's width and height (0 is the left or top edge, 1 the right or bottom edge)."
    advice = "Call the tool at most once per turn, and only for regions you still need to see."

    def run(self, env: VideoSeekEnv, time: float, box: list[float], **_: Any) -> ToolResult:
        t = float(time)
        x1, y1, x2, y2 = (float(v) for v in box)
        if not 0.0 <= t <= env.duration:
            raise ToolError(f"zoom time {t:g}s lies outside the video (0-{env.duration:.1f}s)")
        if x1 >= x2 or y1 >= y2:
            raise ToolError(f"zoom box needs x1 < x2 and y1 < y2, got [{x1:g}, {y1:g}, {x2:g}, {y2:g}]")
        if x2 <= 0 or y2 <= 0 or x1 >= 1 or y1 >= 1:
            raise ToolError(f"zoom box [{x1:g}, {y1:g}, {x2:g}, {y2:g}] lies outside the frame (0-1)")
        region = [min(max(v, 0.0), 1.0) for v in (x1, y1, x2, y2)]
        clipped = region != [x1, y1, x2, y2]
        frames, ts = env.read_frames([t], box=region)
        h, w = frames.shape[1:3]
        box_text = ", ".join(f"{v:.2f}" for v in region)
        note = f" (clipped to the frame: requested [{x1:g}, {y1:g}, {x2:g}, {y2:g}])" if clipped else ""
        text = f"zoom returned the frame at {format_times(ts[:1])}, region [{box_text}]{note}, at {w}x{h} pixels."
        return ToolResult(text, frames, ts, arguments={"time": t, "box": region}, region=(float(ts[0]), region), clipped=clipped)

"""A tool in one file: `frame_at(time)`, the one frame shown at a time.

Use it by its path wherever tools are named; no registration step is needed elsewhere:

    EnvConfig(tools=["crop_video", "examples/custom_tool.py:FrameAtTool"])
    videoseek rollout --tools crop_video,examples/custom_tool.py:FrameAtTool ...

A file path is relative to the current directory (here the repository root); a module on the
Python path is named "package.module:Class". verl's Ray workers and TRL import the tool by the same
string. docs/extending.md, "Add a tool", explains each part.

>>> from videoseek.envs.tools import check_arguments
>>> check_arguments(FrameAtTool, {"time": "soon"})[1]
"frame_at argument 'time': 'soon' is not of type 'number'"
"""

from __future__ import annotations

from videoseek.envs.tools import Tool, ToolError, ToolResult, register_tool


@register_tool
class FrameAtTool(Tool):
    name = "frame_at"
    description = "Return the single frame shown at `time`, with its timestamp."
    parameters = {
        "type": "object",
        "properties": {"time": {"type": "number", "description": "seconds from the beginning of the video"}},
        "required": ["time"],
    }
    # The system prompt's words about the tool (see `videoseek.envs.tools.system_prompt`).
    prompt = "You can look at the single frame shown at any time with the frame_at tool."
    action = "look at one frame"
    example = {"time": 12.5}
    usage = '{"time": <seconds>}'

    def run(self, env, time: float) -> ToolResult:
        # The env has already checked the arguments against `parameters`: `time` is a finite number.
        if not 0.0 <= time <= env.duration:
            raise ToolError(f"frame_at time {time:g}s lies outside the video (0-{env.duration:.1f}s)")
        frames, timestamps = env.read_frames([time])  # the shared frame cache, the episode's pixel budget and perturbation
        return ToolResult(text=f"frame_at returned the frame at {timestamps[0]:.1f}s.", frames=frames, timestamps=timestamps)

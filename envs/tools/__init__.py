"""Tools the agent calls on the video: a registry that every path reads.

`Tool`, `ToolResult`, `ToolError` and `register_tool` are the interface (`base.py`); the built-in
tools are `crop_video(start, end)` (frames of a time span) and `zoom(time, box)` (a region of one
frame at native resolution). `EnvConfig(tools=[...])` takes registered names or import paths
`"package.module:Class"`; the system prompt and the schemas the model sees are built from them
(`system_prompt`, `tool_schemas`). docs/extending.md, "Add a tool", walks through writing one.
"""

from videoseek.envs.tools.base import (
    TOOLS, Tool, ToolError, ToolResult, check_arguments, format_times, get_tool, register_tool, resolve_tools, tool_names,
)  # fmt: skip
from videoseek.envs.tools.crop_video import CropVideoTool
from videoseek.envs.tools.zoom import ZoomTool
from videoseek.envs.tools.prompt import DEFAULT_TOOLS, system_prompt, think_nudge, tool_schemas, usage_hint

__all__ = [
    "DEFAULT_TOOLS", "TOOLS", "CropVideoTool", "Tool", "ToolError", "ToolResult", "ZoomTool", "check_arguments", "format_times",
    "get_tool", "register_tool", "resolve_tools", "system_prompt", "think_nudge", "tool_names",
    "tool_schemas", "usage_hint",
]

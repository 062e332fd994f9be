"""The action protocol's default words: the system prompt and tool schema of the default tools.

One assistant turn is an optional `<think>...</think>` followed by exactly one Hermes tool call
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` or one `<answer>...</answer>`. The words
are built from the configured tools (`videoseek.envs.tools.system_prompt`, `tool_schemas`); an env
gives its own in `info["instructions"]` and `info["tools"]`, which every path reads. The constants
here are those of the default tools (`DEFAULT_TOOLS`), kept for code written against them.

>>> SYSTEM_PROMPT == system_prompt(DEFAULT_TOOLS), "<answer>" in SYSTEM_PROMPT
(True, True)
"""

from __future__ import annotations

from typing import Any

from videoseek.envs.tools import DEFAULT_TOOLS, system_prompt, tool_schemas
from videoseek.envs.tools.prompt import NO_TOOL_SYSTEM_PROMPT

SYSTEM_PROMPT: str = system_prompt(DEFAULT_TOOLS)
# The default tool's OpenAI function schema (what `info["tools"][0]` holds with the default tools).
CROP_VIDEO_TOOL: dict[str, Any] = tool_schemas(DEFAULT_TOOLS)[0]

__all__ = ["CROP_VIDEO_TOOL", "NO_TOOL_SYSTEM_PROMPT", "SYSTEM_PROMPT"]

"""The action protocol the env speaks: the `crop_video` tool schema and the system prompt.

One assistant turn is an optional `<think>...</think>` followed by exactly one Hermes tool call
`<tool_call>{"name": "crop_video", "arguments": {"start": s, "end": e}}</tool_call>` or one
`<answer>...</answer>` (the `crop_video` tool of Open-o3-Video-v2, seed 003). `SYSTEM_PROMPT`
teaches exactly that; `CROP_VIDEO_TOOL` is the OpenAI function schema that Qwen's chat templates
and verl's tool configs take. `VideoSeekEnv.reset` returns both in `info["instructions"]` and
`info["tools"]`; `videoseek.agents.prompting` re-exports them (the env must not import agents).

>>> CROP_VIDEO_TOOL["function"]["name"], "<answer>" in SYSTEM_PROMPT
('crop_video', True)
"""

from __future__ import annotations

from typing import Any

CROP_VIDEO_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "crop_video",
        "description": (
            "Return frames from the time span [start, end] of the video, with their timestamps. "
            "Use it to look closer at the moment that answers the question."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "start": {"type": "number", "description": "start of the span, in seconds from the beginning of the video"},
                "end": {"type": "number", "description": "end of the span, in seconds; greater than start"},
            },
            "required": ["start", "end"],
        },
    },
}

SYSTEM_PROMPT = """You answer a question about a video. You first see a few frames sampled from the whole video, each with its time in seconds. You can look closer at any part of the video with the crop_video tool: it returns frames from the time span you ask for, with their times.

In every turn, first reason inside <think> </think>, then do exactly one of the following:
- look closer at a time span: <tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 18.5}}</tool_call>
- give your final answer: <answer>your answer</answer>

Times are seconds from the start of the video; start must be smaller than end and the span must lie inside the video. Call the tool at most once per turn, and only for spans you still need: short crops that cover where the answer is visible help, repeated or irrelevant crops are penalised. When you describe what you see, cite the frame time (for example "at 12.5s"). For a multiple-choice question answer with the option letter only (for example <answer>B</answer>); for a number give the number; for a time span give [start, end] in seconds."""

# The no-tool baseline (`EnvConfig(tools=False)`, `videoseek rollout --no-tools`): the same answer
# format, one turn, only the frames shown, and no word about a tool.
NO_TOOL_SYSTEM_PROMPT = """You answer a question about a video. You see frames sampled uniformly from the whole video, each with its time in seconds.

First reason inside <think> </think>, then give your final answer: <answer>your answer</answer>

For a multiple-choice question answer with the option letter only (for example <answer>B</answer>); for a number give the number; for a time span give [start, end] in seconds."""

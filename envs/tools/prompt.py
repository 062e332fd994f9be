"""The words the model reads about its tools, built from the configured tools.

`system_prompt(tools)` is the protocol's system prompt: what the tools do, one line per action
(each tool's call in the Hermes `<tool_call>` form, then the answer), the tools' argument rules and
the answer format. With the default tools it is, word for word, the prompt VideoSeek has always
used, so the tiny model's tokenizer and every recorded run keep their tokens. `tool_schemas` are
the OpenAI function schemas the chat template lists; `think_nudge` and `usage_hint` are the env's
replies to a turn without an action and to a malformed call.

>>> system_prompt(["crop_video", "zoom"]).count("<tool_call>")
2
>>> think_nudge(["crop_video"])
'Continue. Call crop_video(start, end) to look closer at a time span, or give your final answer in <answer></answer>.'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from videoseek.envs.tools.base import Tool, get_tool

DEFAULT_TOOLS: tuple[str, ...] = ("crop_video",)

_HEAD = "You answer a question about a video. You first see a few frames sampled from the whole video, each with its time in seconds."
_ANSWER_LINE = "- give your final answer: <answer>your answer</answer>"
_CITE = 'When you describe what you see, cite the frame time (for example "at 12.5s").'
_FORMATS = (
    "For a multiple-choice question answer with the option letter only (for example <answer>B</answer>); "
    "for a number give the number; for a time span give [start, end] in seconds."
)
_ONE_TOOL_ADVICE = "Call the tool at most once per turn, and only for what you still need: repeated or irrelevant calls are penalised."
_MANY_TOOLS_ADVICE = "Call at most one tool per turn, and only for what you still need: repeated or irrelevant calls are penalised."

# The no-tool baseline (`EnvConfig(tools=[])`): the same answer format, one turn, only the frames
# shown, and no word about a tool.
NO_TOOL_SYSTEM_PROMPT = f"""You answer a question about a video. You see frames sampled uniformly from the whole video, each with its time in seconds.

First reason inside <think> </think>, then give your final answer: <answer>your answer</answer>

{_FORMATS}"""


def _classes(tools: Sequence[str | type[Tool] | Tool]) -> list[type[Tool]]:
    """Tool classes of names, import paths, classes or instances."""
    return [t if isinstance(t, type) else type(t) if isinstance(t, Tool) else get_tool(t) for t in tools]


def system_prompt(tools: Sequence[str | type[Tool]] = DEFAULT_TOOLS) -> str:
    """The system prompt for these tools (names, import paths or classes); no tools: `NO_TOOL_SYSTEM_PROMPT`."""
    classes = _classes(tools)
    if not classes:
        return NO_TOOL_SYSTEM_PROMPT
    intro = " ".join([_HEAD, *(c.prompt for c in classes if c.prompt)])
    actions = [f"- {c.action or 'call ' + c.name}: {c.call_text()}" for c in classes]
    advice = (classes[0].advice or _ONE_TOOL_ADVICE) if len(classes) == 1 else _MANY_TOOLS_ADVICE
    rules = " ".join([*(c.rules for c in classes if c.rules), advice, _CITE, _FORMATS])
    turn = "In every turn, first reason inside <think> </think>, then do exactly one of the following:"
    return "\n\n".join([intro, "\n".join([turn, *actions, _ANSWER_LINE]), rules])


def tool_schemas(tools: Sequence[str | type[Tool]] = DEFAULT_TOOLS) -> list[dict[str, Any]]:
    """The OpenAI function schemas of these tools, in order (fresh dicts: callers may change them)."""
    return [c.schema() for c in _classes(tools)]


def _signature(cls: type[Tool]) -> str:
    return f"{cls.name}({', '.join(cls.parameters.get('properties', {}))})"


def think_nudge(tools: Sequence[str | type[Tool]] = DEFAULT_TOOLS) -> str:
    """The env's reply to a turn with neither a tool call nor an answer."""
    classes = _classes(tools)
    if not classes:
        return "Continue. Give your final answer in <answer></answer>."
    calls = " or ".join(f"{_signature(c)} to {c.action}" if c.action else _signature(c) for c in classes)
    return f"Continue. Call {calls}, or give your final answer in <answer></answer>."


def usage_hint(tools: Sequence[str | type[Tool]] = DEFAULT_TOOLS) -> str:
    """What the env appends to a malformed call's error: how to call the tools, or to answer."""
    classes = _classes(tools)
    if not classes:
        return "Answer in <answer></answer>."
    forms = [f'<tool_call>{{"name": {json.dumps(c.name)}, "arguments": {c.usage or "{...}"}}}</tool_call>' for c in classes]
    if len(forms) == 1:
        return f"Call the tool as {forms[0]} or answer in <answer></answer>."
    return f"Call a tool as {', or '.join(forms)}, or answer in <answer></answer>."

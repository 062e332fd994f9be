"""The tool interface: `Tool`, `ToolResult`, `ToolError`, the registry (`register_tool`) and argument checks.

A tool is one class: it sets `name`, `description` and JSON-schema `parameters`, and its
`run(env, **arguments)` returns a `ToolResult` (text, and optionally frames with their times).
`register_tool` files it under its name, so `EnvConfig(tools=["my_tool"])` finds it; an import path
`"package.module:Class"` works as well, so verl's Ray workers and TRL import the same class without
a registration step of their own. The env checks a call's arguments against `parameters` before
`run` (`check_arguments`): a wrong type, a missing field or a non-finite number is a one-line error,
never an exception. `run` raises `ToolError("reason")` to reject a call: no frames come back, the
reason is the turn's `info["error"]`, and the turn is spent.

>>> class Clock(Tool):
...     name = "clock"
...     description = "Say the video's duration."
...     parameters = {"type": "object", "properties": {}}
...     def run(self, env, **arguments):
...         return ToolResult(text=f"the video lasts {env.duration:.1f}s")
>>> _ = register_tool(Clock)
>>> get_tool("clock").schema()["function"]["name"]
'clock'
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from videoseek.envs.video import format_seconds
from videoseek.rewards.imports import import_subclass, same_class

if TYPE_CHECKING:  # tools get the env at run time; envs.env imports this module
    from videoseek.envs.env import VideoSeekEnv


class ToolError(Exception):
    """Raised by `Tool.run` to reject a call; its message is the one-line reason the agent reads."""


@dataclass
class ToolResult:
    """What a tool call returns.

    text: what the agent reads (the env appends subtitle lines of the frames' times, when the
        sample has subtitles).
    frames, timestamps: uint8 (n, H, W, 3) and seconds in the source video, as `env.read_frames`
        returns them; None for a text-only tool.
    arguments: the arguments as the tool read them (clipped values included); None: as given.
    span: the time span [start, end] the call retrieved, clipped to the video; it is added to the
        episode's temporal evidence (`EvidenceState`, CS-GRPO). None: no temporal evidence.
    region: (time, [x1, y1, x2, y2]) of a spatial look at one frame (box in fractions of the
        frame), scored against the sample's key-frame boxes. None: no spatial evidence.
    clipped: the tool clipped an argument to the video or the frame.
    """

    text: str
    frames: np.ndarray | None = None
    timestamps: np.ndarray | None = None
    arguments: dict[str, Any] | None = None
    span: tuple[float, float] | None = None
    region: tuple[float, list[float]] | None = None
    clipped: bool = False


class Tool:
    """A tool the agent can call. Subclass it, set the class attributes, implement `run`.

    name, description, parameters: the OpenAI function schema (`schema()`), which the chat
        template shows the model and verl's tool configs take.
    returns_frames: the tool returns frames; the env refuses its calls once the episode's
        frame budget is spent, and counts the frames it returns against that budget.
    prompt, action, rules, advice: the system prompt's sentences about the tool (`system_prompt`):
        what it does, the "- <action>: <tool_call>...</tool_call>" line, its argument rules, and
        the advice given when it is the only tool. `example` holds the example arguments of that
        line and `usage` the placeholder arguments an error message shows.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    returns_frames: ClassVar[bool] = True
    prompt: ClassVar[str] = ""
    action: ClassVar[str] = ""
    example: ClassVar[dict[str, Any]] = {}
    usage: ClassVar[str] = ""
    rules: ClassVar[str] = ""
    advice: ClassVar[str] = ""

    def run(self, env: VideoSeekEnv, **arguments: Any) -> ToolResult:
        raise NotImplementedError

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The OpenAI function schema: {"type": "function", "function": {name, description, parameters}}."""
        return {"type": "function", "function": {"name": cls.name, "description": cls.description, "parameters": json.loads(json.dumps(cls.parameters))}}

    @classmethod
    def call_text(cls, arguments: Mapping[str, Any] | None = None) -> str:
        """The default-dialect text of a call: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`."""
        return "<tool_call>" + json.dumps({"name": cls.name, "arguments": dict(arguments if arguments is not None else cls.example)}) + "</tool_call>"


def format_times(ts: Sequence[float]) -> str:
    """Frame times as the env's text and the renderer's frame labels write them: "1.0s, 2.5s, 2.53s"
    (`videoseek.envs.video.format_seconds`, which says why two decimals)."""
    return ", ".join(format_seconds(t) + "s" for t in ts)


# ---- the registry --------------------------------------------------------------------------------
TOOLS: dict[str, type[Tool]] = {}


RESERVED_NAMES = ("think", "answer", "invalid", "tool_call")  # action types of the trajectory record


def register_tool(cls: type[Tool]) -> type[Tool]:
    """Register `cls` under `cls.name` (usable as a class decorator).

    Registering the same class again is a no-op, and so is a class of the same name from the same
    file imported a second time (a module run as a script and imported, or loaded by path).
    Raises ValueError for a class that is no `Tool`, has no name, or whose name another class holds.
    """
    if not (isinstance(cls, type) and issubclass(cls, Tool)):
        raise ValueError(f"register_tool takes a Tool subclass, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name.isidentifier() or cls.name in RESERVED_NAMES:
        raise ValueError(f"tool class {cls.__qualname__} needs a name that is a Python identifier and not one of {RESERVED_NAMES}, got {cls.name!r}")
    held = TOOLS.get(cls.name)
    if held is not None and not same_class(held, cls):
        raise ValueError(f"tool name {cls.name!r} is already registered by {held.__module__}.{held.__qualname__}")
    TOOLS[cls.name] = cls
    return cls


def get_tool(spec: str) -> type[Tool]:
    """The tool class of a registered name or an import path "package.module:Class" or "path/to/file.py:Class"
    (registered on import).

    Raises ValueError naming the spec when there is no such tool.
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"a tool is a registered name or 'package.module:Class', got {spec!r}")
    if spec in TOOLS:
        return TOOLS[spec]
    if ":" in spec:
        return register_tool(import_subclass(spec, Tool, "tool"))
    raise ValueError(f"unknown tool {spec!r}; registered tools: {', '.join(sorted(TOOLS))} (or give an import path 'package.module:Class')")


def resolve_tools(specs: Sequence[str]) -> list[type[Tool]]:
    """The tool classes of a list of specs, in order; a repeated name is an error."""
    out: list[type[Tool]] = []
    for spec in specs:
        cls = get_tool(spec)
        if any(c.name == cls.name for c in out):
            raise ValueError(f"tool {cls.name!r} is listed twice")
        out.append(cls)
    return out


def tool_names(specs: Sequence[str]) -> list[str]:
    """The names of a list of specs (an import path becomes its tool's name)."""
    return [cls.name for cls in resolve_tools(specs)]


# ---- argument checks -----------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _validator(cls: type[Tool]) -> Any:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(cls.parameters)
    return Draft202012Validator(cls.parameters)


def _plain(value: Any) -> Any:
    """JSON-like Python values: numpy scalars and arrays become floats, ints and lists."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _non_finite(value: Any, path: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        return next((p for k, v in value.items() if (p := _non_finite(v, f"{path}.{k}" if path else k))), None)
    if isinstance(value, list):
        return next((p for i, v in enumerate(value) if (p := _non_finite(v, f"{path}.{i}" if path else str(i)))), None)
    return None


def check_arguments(cls: type[Tool], arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments as plain JSON values, None) if they satisfy `cls.parameters`, else (None, one-line reason).

    Non-finite numbers are refused too (JSON has none; a structured action may carry them).

    >>> from videoseek.envs.tools import get_tool
    >>> check_arguments(get_tool("crop_video"), {"start": 1, "end": "x"})[1]
    "crop_video argument 'end': 'x' is not of type 'number'"
    """
    from jsonschema.exceptions import best_match

    if not isinstance(arguments, Mapping):
        return None, f"{cls.name} arguments must be a JSON object, got {type(arguments).__name__}"
    args = _plain(arguments)
    if (bad := _non_finite(args, "")) is not None:
        return None, f"{cls.name} argument '{bad}' must be a finite number"
    error = best_match(_validator(cls).iter_errors(args))
    if error is None:
        return args, None
    where = ".".join(str(p) for p in error.absolute_path)
    message = " ".join(error.message.split())[:200]
    return None, f"{cls.name} argument '{where}': {message}" if where else f"{cls.name} arguments: {message}"

"""Parse one assistant turn into an action: `Think`, `CropVideo(start, end)`, `Answer(text)` or `Invalid`.

Default dialect (Qwen / Hermes tool calls)::

    <think>...</think>
    <tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 18.5}}</tool_call>
    or  <answer>B</answer>

Parsing is lenient about syntax and strict about meaning: single quotes, trailing commas, a
missing closing tag, `arguments` given as a JSON string, `start_time`/`end_time` keys, times as
"MM:SS" or "HH:MM:SS.s", and the dialects `<retrieve>s, e</retrieve>` and `\\boxed{[s, e]}` are
repaired and every repair is recorded; the semantic checks (start < end, inside the video) are the
env's. `parse_action` never raises.

>>> parse_action('<think>need 0:12</think><tool_call>{"name": "crop_video", "arguments": {"start": "0:12", "end": 18.5}}</tool_call>').action
CropVideo(start=12.0, end=18.5)
>>> parse_action("<answer> B </answer>").action
Answer(text='B')
>>> parse_action("let me look").action
Think()
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Union

from videoseek.rewards.timestamps import parse_time as parse_time_text


@dataclass(frozen=True)
class Think:
    """A turn with neither a tool call nor an answer."""


@dataclass(frozen=True)
class CropVideo:
    start: float
    end: float


@dataclass(frozen=True)
class Answer:
    text: str


@dataclass(frozen=True)
class Invalid:
    """A malformed tool call: costs a turn and counts for the penalties."""

    reason: str


Action = Union[Think, CropVideo, Answer, Invalid]

TOOL_NAME = "crop_video"


@dataclass
class ParsedTurn:
    action: Action
    think: str | None = None
    repairs: list[str] = field(default_factory=list)
    dialect: str = "none"


def action_to_dict(action: Action) -> dict[str, Any]:
    """JSON form used in trajectories: {"type": ..., fields...}."""
    if isinstance(action, CropVideo):
        return {"type": "crop_video", "start": action.start, "end": action.end}
    if isinstance(action, Answer):
        return {"type": "answer", "text": action.text}
    if isinstance(action, Invalid):
        return {"type": "invalid", "reason": action.reason}
    return {"type": "think"}


def action_to_text(action: Action) -> str:
    """The default-dialect text of a structured action (what a model would write for it).

    >>> action_to_text(CropVideo(12.0, 18.5))
    '<tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 18.5}}</tool_call>'
    """
    if isinstance(action, CropVideo):
        args = {"start": round(action.start, 3), "end": round(action.end, 3)}
        return "<tool_call>" + json.dumps({"name": TOOL_NAME, "arguments": args}) + "</tool_call>"
    if isinstance(action, Answer):
        return f"<answer>{action.text}</answer>"
    return ""


# ---- time values ------------------------------------------------------------------------------
def parse_time(value: Any) -> float | None:
    """Seconds from a number, "12.5", "12.5s", "MM:SS" or "HH:MM:SS.s"; None when unparseable or not finite.

    Strings are read by `videoseek.rewards.timestamps.parse_time`, the same parser the timestamp
    reward uses, so a call and a cited time mean the same thing.

    >>> parse_time("01:02:03.5"), parse_time("2:05"), parse_time("7s"), parse_time("nan")
    (3723.5, 125.0, 7.0, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    if not isinstance(value, str) or len(value) > 64:
        return None
    return parse_time_text(value)


# ---- tag extraction ---------------------------------------------------------------------------
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)
_ANSWER = re.compile(r"<answer>(.*?)(</answer>|$)", re.S)
_RETRIEVE = re.compile(r"<retrieve>(.*?)</retrieve>", re.S)
_BOXED_SPAN = re.compile(r"\\boxed\{\s*\[\s*([^\],]+?)\s*,\s*([^\]]+?)\s*\]\s*\}")


def _loads_lenient(body: str, repairs: list[str]) -> Any:
    body = body.strip()
    if body.startswith("```"):
        body = re.sub(r"^```(?:json)?\s*|\s*```$", "", body)
        repairs.append("stripped code fence")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        pass
    fixed = re.sub(r",\s*([}\]])", r"\1", body)
    if fixed != body:
        try:
            val = json.loads(fixed)
            repairs.append("removed trailing comma")
            return val
        except (json.JSONDecodeError, RecursionError):
            pass
    if len(body) <= 4096:  # literal_eval is safe but can be slow on huge nested input
        try:
            val = ast.literal_eval(body.replace("true", "True").replace("false", "False").replace("null", "None"))
            repairs.append("parsed Python-style literal (single quotes)")
            return val
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            pass
    # Unbalanced braces: a call cut off mid-object.
    opens, closes = body.count("{"), body.count("}")
    if 0 < closes < opens:
        try:
            val = json.loads(body + "}" * (opens - closes))
            repairs.append("closed unbalanced braces")
            return val
        except (json.JSONDecodeError, RecursionError):
            pass
    return None


def _span_from_arguments(args: Any, repairs: list[str]) -> tuple[Any, Any] | None:
    if isinstance(args, str):
        inner = _loads_lenient(args, repairs)
        if inner is not None:
            repairs.append("arguments given as a JSON string")
            args = inner
    if isinstance(args, (list, tuple)) and len(args) == 2:
        repairs.append("arguments given as a [start, end] list")
        return args[0], args[1]
    if not isinstance(args, dict):
        return None
    for s_key, e_key in (("start", "end"), ("start_time", "end_time"), ("begin", "end"), ("from", "to")):
        if s_key in args and e_key in args:
            if s_key != "start":
                repairs.append(f"argument names {s_key}/{e_key} read as start/end")
            return args[s_key], args[e_key]
    for key in ("time_range", "span", "interval", "segment"):
        val = args.get(key)
        if isinstance(val, (list, tuple)) and len(val) == 2:
            repairs.append(f"argument {key} read as [start, end]")
            return val[0], val[1]
    return None


def _crop_from_values(s: Any, e: Any) -> Action:
    start, end = parse_time(s), parse_time(e)
    if start is None or end is None:
        bad = s if start is None else e
        return Invalid(f"crop_video time {str(bad)[:40]!r} is not a finite number or MM:SS time")
    return CropVideo(start, end)


def _parse_tool_call(body: str, closed: bool, repairs: list[str]) -> Action:
    if not closed:
        repairs.append("missing </tool_call>")
    obj = _loads_lenient(body, repairs)
    if obj is None:
        return Invalid("tool call is not valid JSON")
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        repairs.append("tool call wrapped in a list")
        obj = obj[0]
    if not isinstance(obj, dict):
        return Invalid("tool call must be a JSON object with name and arguments")
    if "function" in obj and isinstance(obj["function"], dict):
        repairs.append("OpenAI-style function wrapper")
        obj = obj["function"]
    name = obj.get("name")
    if name != TOOL_NAME:
        if isinstance(name, str) and name.strip().lower().replace("-", "_") == TOOL_NAME:
            repairs.append(f"tool name {name!r} read as {TOOL_NAME}")
        else:
            return Invalid(f"unknown tool {str(name)[:40]!r}; the only tool is {TOOL_NAME}")
    args = obj.get("arguments", obj.get("parameters"))
    if args is None and ("start" in obj or "start_time" in obj):
        repairs.append("arguments at top level")
        args = obj
    span = _span_from_arguments(args, repairs)
    if span is None:
        return Invalid("crop_video needs arguments start and end (seconds)")
    return _crop_from_values(*span)


def parse_action(text: Any) -> ParsedTurn:
    """Parse one assistant turn; never raises, whatever `text` is."""
    try:
        return _parse(text)
    except Exception as exc:  # last line of defence: a policy's text must never crash the env
        return ParsedTurn(Invalid(f"unparseable turn ({type(exc).__name__})"), repairs=["parser fallback"])


def _parse(text: Any) -> ParsedTurn:
    repairs: list[str] = []
    if not isinstance(text, str):
        return ParsedTurn(Invalid(f"assistant turn must be text, got {type(text).__name__}"))
    think_m = _THINK.search(text)
    think = think_m.group(1).strip() if think_m else None

    # Candidates in text order: the first one decides, later ones are recorded as ignored.
    found: list[tuple[int, str, re.Match[str]]] = []
    for kind, pat in (("tool_call", _TOOL_CALL), ("answer", _ANSWER), ("retrieve", _RETRIEVE), ("boxed", _BOXED_SPAN)):
        for m in pat.finditer(text):
            # Tags inside the think block are the model talking about them, not acting.
            if think_m and think_m.start() < m.start() < think_m.end() and think_m.group(0).endswith("</think>"):
                continue
            found.append((m.start(), kind, m))
    if not found:
        return ParsedTurn(Think(), think=think, dialect="none")
    found.sort(key=lambda x: x[0])
    _, kind, m = found[0]
    if len(found) > 1:
        repairs.append(f"{len(found) - 1} more action(s) after the first ignored")

    if kind == "answer":
        if not m.group(2):
            repairs.append("missing </answer>")
        ans = m.group(1).strip()
        if not ans:
            return ParsedTurn(Invalid("empty answer"), think=think, repairs=repairs, dialect="answer")
        return ParsedTurn(Answer(ans), think=think, repairs=repairs, dialect="answer")
    if kind == "tool_call":
        action = _parse_tool_call(m.group(1), bool(m.group(2)), repairs)
        return ParsedTurn(action, think=think, repairs=repairs, dialect="hermes")
    if kind == "retrieve":
        parts = [p for p in re.split(r"[,\s]+|\bto\b|-(?=\s*\d)", m.group(1).strip()) if p]
        repairs.append("retrieve dialect")
        if len(parts) != 2:
            return ParsedTurn(Invalid("<retrieve> needs two times: start, end"), think=think, repairs=repairs, dialect="retrieve")
        return ParsedTurn(_crop_from_values(*parts), think=think, repairs=repairs, dialect="retrieve")
    repairs.append("boxed span dialect")
    return ParsedTurn(_crop_from_values(m.group(1), m.group(2)), think=think, repairs=repairs, dialect="boxed")

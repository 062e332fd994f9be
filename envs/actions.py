"""Parse one assistant turn into an action: `Think`, `ToolCall(name, arguments)`, `Answer(text)` or `Invalid`.

Default dialect (Qwen / Hermes tool calls)::

    <think>...</think>
    <tool_call>{"name": "zoom", "arguments": {"time": 12.5, "box": [0.1, 0.1, 0.3, 0.3]}}</tool_call>
    or  <answer>B</answer>

A call of any name parses to `ToolCall`; the env dispatches it by name to its configured tools
(`videoseek.envs.tools`) and checks the arguments against the tool's schema. `crop_video` keeps
its own lenient reading, the dialects of public work (`CropVideo(start, end)`, a `ToolCall`):

Parsing is lenient about syntax and strict about meaning: single quotes, trailing commas, a
missing closing tag, `arguments` given as a JSON string, `start_time`/`end_time` keys, times as
"MM:SS" or "HH:MM:SS.s", and the dialects `<retrieve>s, e</retrieve>` and `\\boxed{[s, e]}` are
repaired and every repair is recorded; the semantic checks (start < end, inside the video) are the
env's. `parse_action` never raises.

>>> parse_action('<think>need 0:12</think><tool_call>{"name": "crop_video", "arguments": {"start": "0:12", "end": 18.5}}</tool_call>').action
CropVideo(start=12.0, end=18.5)
>>> parse_action('<tool_call>{"name": "zoom", "arguments": {"time": 3, "box": [0, 0, 0.5, 0.5]}}</tool_call>').action
ToolCall(name='zoom', arguments={'time': 3, 'box': [0, 0, 0.5, 0.5]})
>>> parse_action("<answer> B </answer>").action
Answer(text='B')
>>> parse_action("let me look").action
Think()
"""

from __future__ import annotations

import ast
import json
import numbers
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Union

import numpy as np

from videoseek.rewards.tags import iter_blocks, scan_end
from videoseek.rewards.timestamps import parse_time  # the one time parser, re-exported here


@dataclass(frozen=True)
class Think:
    """A turn with neither a tool call nor an answer."""


@dataclass(frozen=True)
class ToolCall:
    """A call of the tool `name` with its arguments as written (checked by the env against the tool's schema)."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CropVideo:
    """A `crop_video(start, end)` call: the structured form of the first built-in tool's calls."""

    start: float
    end: float

    @property
    def name(self) -> str:
        return CROP_VIDEO

    @property
    def arguments(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end}


@dataclass(frozen=True)
class Answer:
    text: str


@dataclass(frozen=True)
class Invalid:
    """A malformed tool call: costs a turn and counts for the penalties."""

    reason: str


Action = Union[Think, ToolCall, CropVideo, Answer, Invalid]

CROP_VIDEO = "crop_video"  # the tool whose calls the lenient dialects below read (`<retrieve>`, `\\boxed{}`, span keys)
RESERVED_TYPES = ("think", "answer", "invalid")  # action types that are not tool calls


@dataclass
class ParsedTurn:
    action: Action
    think: str | None = None
    repairs: list[str] = field(default_factory=list)
    dialect: str = "none"


def action_to_dict(action: Action) -> dict[str, Any]:
    """JSON form used in trajectories (schema 2): {"type": "tool_call", "name", "arguments"}, {"type": "answer", "text"}, ...

    >>> action_to_dict(CropVideo(1.0, 2.0))
    {'type': 'tool_call', 'name': 'crop_video', 'arguments': {'start': 1.0, 'end': 2.0}}
    """
    if isinstance(action, (ToolCall, CropVideo)):
        return {"type": "tool_call", "name": action.name, "arguments": _jsonable(action.arguments)}
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
        return "<tool_call>" + json.dumps({"name": CROP_VIDEO, "arguments": args}) + "</tool_call>"
    if isinstance(action, ToolCall):
        return "<tool_call>" + json.dumps({"name": action.name, "arguments": _jsonable(action.arguments)}) + "</tool_call>"
    if isinstance(action, Answer):
        return f"<answer>{action.text}</answer>"
    return ""


def _jsonable(value: Any) -> Any:
    """A JSON-serialisable copy of call arguments (numpy values as Python ones, anything else as its repr)."""
    try:
        return json.loads(json.dumps(value, default=lambda v: v.item() if isinstance(v, np.generic) else v.tolist() if isinstance(v, np.ndarray) else _describe(v, 80)))
    except (ValueError, TypeError, RecursionError):
        return {"unreadable": _describe(value, 80)}


def tool_call_of(action: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(tool name, arguments) of a recorded action dict, schema 2 or 1; None for a think, answer or invalid turn.

    >>> tool_call_of({"type": "crop_video", "start": 1.0, "end": 2.0})  # schema 1
    ('crop_video', {'start': 1.0, 'end': 2.0})
    """
    kind = action.get("type")
    if kind == "tool_call":
        args = action.get("arguments")
        return str(action.get("name")), dict(args) if isinstance(args, dict) else {}
    if kind == CROP_VIDEO:  # schema 1
        return CROP_VIDEO, {k: action[k] for k in ("start", "end") if k in action}
    return None


# ---- values in error messages -----------------------------------------------------------------
def _describe(value: Any, limit: int = 40) -> str:
    """A short one-line repr of any value for an error message (never raises)."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return repr(sanitize_text(text[:limit])[0])


# ---- text that cannot be written ---------------------------------------------------------------
_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize_text(text: str) -> tuple[str, int]:
    """`text` made encodable as UTF-8, and how many code points had to be changed (0: unchanged).

    A Python str can hold lone UTF-16 surrogates (U+D800-U+DFFF: a tokenizer's broken byte
    decoding, JSON "\\ud83d" escapes) that no UTF-8 writer accepts; one in a trajectory aborted a
    whole rollout run when it was serialised. A pair written as two code points becomes the
    character it encodes; every lone half becomes U+FFFD.

    >>> sanitize_text("a\\ud800b"), sanitize_text("\\ud83d\\ude00"), sanitize_text("ok")
    (('a�b', 1), ('😀', 2), ('ok', 0))
    """
    if _SURROGATE.search(text) is None:
        return text, 0
    count = len(_SURROGATE.findall(text))
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"), count


def one_line(text: str, limit: int = 300) -> str:
    """Whitespace runs (newlines included) collapsed to one space, cut to `limit` characters."""
    return " ".join(text.split())[:limit]


# ---- tag extraction ---------------------------------------------------------------------------
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)
_RETRIEVE = re.compile(r"<retrieve>(.*?)</retrieve>", re.S)  # searched up to `scan_end(text, "</retrieve>")`
# \boxed{[s, e]}: found by `_boxed_spans`, which is linear where the equivalent regex
# r"\\boxed\{\s*\[\s*([^\],]+?)\s*,\s*([^\]]+?)\s*\]\s*\}" is cubic ("\boxed{[" and 4 KB of spaces: 33 s).
_BOXED_OPEN = re.compile(r"\\boxed\{\s*\[")
_BOXED_CLOSE = re.compile(r"\]\s*\}")


@dataclass(frozen=True)
class _Found:
    """One action candidate in a turn's text: where it starts and its captured groups."""

    pos: int
    groups: tuple[Any, ...]

    def start(self) -> int:
        return self.pos

    def group(self, k: int) -> Any:
        return self.groups[k - 1]


def _boxed_spans(text: str) -> list[_Found]:
    """Every `\\boxed{[s, e]}` in order, with s and e stripped, as the regex above finds them.

    A candidate is `\\boxed{` ws `[`, then s up to the first ',' (no ']'), then e up to the first
    ']', then ws `}`; s and e are non-empty (an all-space one reads as its last character, as the
    lazy groups did). The first ',' and ']' after a position are cached, so candidates that share
    them cost O(1) each instead of a rescan: linear in the length of the text.
    """
    out: list[_Found] = []
    pos, comma, close, close_ok = 0, -1, -1, False
    while (m := _BOXED_OPEN.search(text, pos)) is not None:
        body = m.end()
        if close < body:
            close = text.find("]", body)
            if close < 0:
                break  # no ']' left: no later candidate can close either
            close_ok = _BOXED_CLOSE.match(text, close) is not None
        if comma < body:
            comma = text.find(",", body)
            comma = len(text) if comma < 0 else comma  # none left: never search again
        if close_ok and body < comma < close - 1:
            s, e = text[body:comma], text[comma + 1 : close]
            out.append(_Found(m.start(), (s.strip() or s[-1], e.strip() or e[-1])))
            pos = _BOXED_CLOSE.match(text, close).end()
        else:
            pos = m.start() + 1
    return out


def _loads_lenient(body: str, repairs: list[str]) -> Any:
    """The JSON value of a tool-call body, repaired where possible (each repair recorded); None if none.

    Linear in the body's length. Length cap: the Python-literal repair (single quotes) is tried
    only on bodies of at most 4096 characters, since `ast.literal_eval` compiles a whole Python
    expression (slow and memory-hungry on huge nested input); longer bodies must be JSON.
    """
    body = body.strip()
    if body.startswith("```"):
        # Same as re.sub(r"^```(?:json)?\s*|\s*```$", "", body), whose `\s*```$` is quadratic on spaces.
        body = body[3:]
        body = (body[4:] if body.startswith("json") else body).lstrip()
        if body.endswith("```"):
            body = body[:-3].rstrip()
        repairs.append("stripped code fence")
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # ValueError: a JSON int over 4300 digits too
        pass
    fixed = re.sub(r",\s*([}\]])", r"\1", body)
    if fixed != body:
        try:
            val = json.loads(fixed)
            repairs.append("removed trailing comma")
            return val
        except (ValueError, RecursionError):
            pass
    if len(body) <= 4096:  # length cap (see the docstring): literal_eval is slow on huge nested input
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
        except (ValueError, RecursionError):
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
        return Invalid(f"crop_video time {_describe(bad)} ({type(bad).__name__}) is not a finite number or MM:SS time")
    return CropVideo(start, end)


def normalize_action(action: Action) -> tuple[Action, int]:
    """A structured action with its fields checked: (valid or `Invalid` action, sanitised characters).

    Policies build actions from whatever they hold, so any value may arrive in any field. Times
    are coerced by `parse_time` (numpy scalars, numeric and MM:SS strings); an answer may be a
    string (numpy too) or a finite real number (`Answer(3)` answers "3"); an `Invalid` reason is
    made one line. Anything else becomes an `Invalid` whose reason says which field was wrong,
    so the env records an invalid turn instead of crashing or writing a trajectory that cannot
    be read back. Never raises.

    >>> normalize_action(CropVideo(np.float32(1.5), "0:03"))
    (CropVideo(start=1.5, end=3.0), 0)
    >>> normalize_action(Answer(None))[0]
    Invalid(reason='answer text must be a string, got NoneType')
    """
    try:
        return _normalize(action)
    except Exception as exc:  # a value whose own methods raise (e.g. a broken __str__)
        return Invalid(f"structured action could not be read ({type(exc).__name__})"), 0


def _normalize(action: Action) -> tuple[Action, int]:
    if isinstance(action, CropVideo):
        return _crop_from_values(action.start, action.end), 0
    if isinstance(action, ToolCall):
        if not isinstance(action.name, str) or not action.name:
            return Invalid(f"tool name must be a non-empty string, got {_describe(action.name)}"), 0
        name, fixed = sanitize_text(one_line(action.name, 64))
        if not isinstance(action.arguments, dict):
            return Invalid(f"{name} arguments must be a JSON object, got {type(action.arguments).__name__}"), fixed
        if name == CROP_VIDEO:  # the same reading as a written crop_video call
            span = _span_from_arguments(action.arguments, [])
            return (_crop_from_values(*span) if span else Invalid("crop_video needs arguments start and end (seconds)")), fixed
        return ToolCall(name, _jsonable(action.arguments)), fixed
    if isinstance(action, Answer):
        text = action.text
        if isinstance(text, (np.generic, np.ndarray)) and getattr(text, "ndim", 0) == 0:
            text = text.item()
        if isinstance(text, (numbers.Real, Decimal)) and not isinstance(text, bool):
            if parse_time(text) is None:
                return Invalid(f"answer {_describe(text)} is not a finite number"), 0
            text = str(text)
        if not isinstance(text, str):
            return Invalid(f"answer text must be a string, got {type(text).__name__}"), 0
        text, fixed = sanitize_text(str(text))
        if not text.strip():
            return Invalid("empty answer"), fixed
        return Answer(text), fixed
    if isinstance(action, Invalid):
        reason = action.reason
        if not isinstance(reason, str):
            reason = "" if reason is None else _describe(reason, 300)
        reason, fixed = sanitize_text(one_line(reason))
        return Invalid(reason or "invalid action (no reason given)"), fixed
    return Think(), 0


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
    if not isinstance(name, str) or not name.strip():
        return Invalid(f"tool call needs a name, got {_describe(name)}")
    normal = name.strip().lower().replace("-", "_").replace(" ", "_")
    if normal != name:
        repairs.append(f"tool name {name[:40]!r} read as {normal[:40]}")
    args = obj.get("arguments", obj.get("parameters"))
    if normal != CROP_VIDEO:
        if isinstance(args, str):
            inner = _loads_lenient(args, repairs)
            if inner is not None:
                repairs.append("arguments given as a JSON string")
                args = inner
        if args is None:
            args = {k: v for k, v in obj.items() if k != "name"}
            if args:
                repairs.append("arguments at top level")
        if not isinstance(args, dict):
            return Invalid(f"{normal[:40]} arguments must be a JSON object, got {type(args).__name__}")
        return ToolCall(sanitize_text(normal[:64])[0], _jsonable(args))
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
    # A turn cut off by the token limit keeps its unclosed think and answer (`unclosed=True`): the
    # answer is accepted with the repair "missing </answer>" (rewards/tags.py).
    think_m = next(iter_blocks(text, "think", unclosed=True), None)
    think = think_m.content.strip() if think_m else None

    # Candidates in text order: the first one decides, later ones are recorded as ignored.
    candidates: dict[str, Any] = {
        "tool_call": _TOOL_CALL.finditer(text),
        "answer": [_Found(b.start, (b.content, "</answer>" if b.closed else "")) for b in iter_blocks(text, "answer", unclosed=True)],
        "retrieve": _RETRIEVE.finditer(text, 0, scan_end(text, "</retrieve>")),
        "boxed": _boxed_spans(text),
    }
    found: list[tuple[int, str, Any]] = []
    for kind, matches in candidates.items():
        for m in matches:
            # Tags inside the think block are the model talking about them, not acting.
            if think_m and think_m.start < m.start() < think_m.end and think_m.closed:
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

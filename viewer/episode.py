"""Turn one raw trajectory (a parsed JSONL line) into the view model the page draws.

The page never interprets the trajectory format itself: this module does, so the format's
reading is in one tested place (docs/architecture.md, "Trajectory files"; schema_version 2, and
version-1 files as they were written). What it derives:

- `calls`: every tool call attempt in order, numbered from 1, whatever its tool, drawn from what it
  returned (`call_record`): a time span (crop_video) with its evidence gain (CS-GRPO's
  g_k = E_k - E_{k-1}, seed 003) and flags duplicate (tIoU > threshold with an earlier call, as
  recorded by the env), fragment, clipped; a box on one frame (zoom) with its IoU against the key
  frames and the nearest frame to draw it on; the times of the frames any other tool returned;
  and for every call its `name(arguments)` label, or, rejected, the env's reason;
- `masked_ranges`: the perturbed time ranges of a DM-GRPO masked group (seed 002), from the
  group's perturbation and from frames marked `masked`;
- `segments` of each assistant turn: think / tool call / answer spans for highlighting;
- `evidence_curve`: coverage, precision and evidence score after each turn;
- `issues`: one line per thing that is wrong (unknown schema version, a missing or unsafe frame
  path, a field of the wrong type). The function never raises on bad content.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from videoseek.envs.actions import tool_call_of
from videoseek.viewer.paths import UnsafePath, resolve_inside
from videoseek.viewer.runindex import SCHEMA_VERSIONS, as_dict, as_float, as_list, as_str

MAX_ISSUES = 20  # more than this many are summarised as "and N more"

# Tags of the default dialect plus the lenient ones DESIGN.md names; an unclosed tag runs to the end.
_TAG = re.compile(r"<(think|tool_call|answer|retrieve)>(.*?)(?:</\1>|$)", re.DOTALL)
_SEGMENT_KIND = {"think": "think", "tool_call": "tool_call", "retrieve": "tool_call", "answer": "answer"}


def segments(text: str) -> list[dict[str, str]]:
    """Split an assistant text into `{"kind", "text"}` parts: plain, think, tool_call, answer.

    The tag text itself is kept in the part so the page shows exactly what the model wrote.

    >>> [s["kind"] for s in segments("<think>a</think> <answer>B</answer>")]
    ['think', 'text', 'answer']
    """
    parts: list[dict[str, str]] = []
    pos = 0
    for m in _TAG.finditer(text):
        if m.start() > pos:
            parts.append({"kind": "text", "text": text[pos : m.start()]})
        parts.append({"kind": _SEGMENT_KIND[m.group(1)], "text": m.group(0)})
        pos = m.end()
    if pos < len(text):
        parts.append({"kind": "text", "text": text[pos:]})
    return parts


def _pair(value: Any) -> list[float] | None:
    """[s, e] when `value` is two finite numbers with s <= e, else None."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        s, e = as_float(value[0]), as_float(value[1])
        if s is not None and e is not None and s <= e:
            return [s, e]
    return None


def masked_ranges(perturbation: Any) -> list[list[float]]:
    """Time ranges named by a perturbation record: any [s, e] pair or list of pairs in its values.

    The rollout runner's perturbation record is a free-form dict (kind, time_range, seed, ...);
    reading every pair-valued field keeps the viewer right for mask variants that name their
    range differently ("time_range", "ranges", "masks").
    """
    out: list[list[float]] = []
    for value in as_dict(perturbation).values():
        pair = _pair(value)
        if pair is not None:
            out.append(pair)
        elif isinstance(value, list):
            out.extend(p for p in (_pair(v) for v in value) if p is not None)
        elif isinstance(value, dict):
            pair = _pair(value.get("time_range"))
            if pair is not None:
                out.append(pair)
    return out


class FrameResolver:
    """Checks frame paths of one run and turns them into URLs; collects the problems it finds."""

    def __init__(self, root: Path, url_for: Callable[[str], str]) -> None:
        self.root = root
        self.url_for = url_for
        self.problems: list[str] = []

    def frame(self, ref: Any, where: str) -> dict[str, Any]:
        """One FrameRef as `{t, url, masked, path, missing}`; url is None when not servable."""
        ref = as_dict(ref)
        path = ref.get("path")
        out = {"t": as_float(ref.get("t")), "masked": bool(ref.get("masked")), "path": path, "url": None, "missing": None}
        if path is None:
            out["missing"] = "no file stored"
            return out
        if not isinstance(path, str):
            out["missing"] = "path is not a string"
            self.problems.append(f"{where}: frame path is not a string: {path!r}")
            return out
        try:
            target = resolve_inside(self.root, path)
        except UnsafePath as exc:
            out["missing"] = "path outside the run"
            self.problems.append(f"{where}: frame path {path!r} refused: {exc}")
            return out
        if not target.is_file():
            out["missing"] = "file missing"
            self.problems.append(f"{where}: frame file missing: {path}")
            return out
        out["url"] = self.url_for(path)
        if not out["url"]:  # the exporter could not read the image
            out["missing"] = "unreadable image"
            self.problems.append(f"{where}: frame file is not a readable image: {path}")
        return out

    def frames(self, refs: Any, where: str) -> list[dict[str, Any]]:
        return [self.frame(ref, where) for ref in as_list(refs)]


def _action(turn: dict[str, Any]) -> dict[str, Any]:
    action = as_dict(turn.get("action"))
    return {**action, "type": as_str(action.get("type")) or "unknown"}


MAX_LABEL = 160  # characters of a call's `name(arguments)` label


def _value_text(value: Any) -> str:
    """An argument value as the label shows it: numbers to 3 decimals, lists in brackets, text quoted."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return format(round(value, 3), "g") if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


def call_label(name: str, arguments: Any) -> str:
    """`name(key=value, ...)`: how the page names a call of any tool.

    >>> call_label("zoom", {"time": 12.5, "box": [0.1, 0.2, 0.35, 0.4]})
    'zoom(time=12.5, box=[0.1, 0.2, 0.35, 0.4])'
    """
    args = ", ".join(f"{k}={_value_text(v)}" for k, v in as_dict(arguments).items())
    text = f"{name or '?'}({args})"
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _box(value: Any) -> list[float] | None:
    """[x1, y1, x2, y2] when `value` is four finite numbers, else None."""
    if isinstance(value, (list, tuple)) and len(value) == 4:
        box = [as_float(v) for v in value]
        if all(v is not None for v in box):
            return box  # type: ignore[return-value]
    return None


def _nearest_frame(time: float, frames: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The servable frame shown closest to `time` among `frames` (the initial and earlier retrieved
    frames), with its distance `dt`; the page draws a zoom's box on it."""
    best = None
    for f in frames:
        if f.get("url") and f.get("t") is not None and (best is None or abs(f["t"] - time) < abs(best["t"] - time)):
            best = f
    if best is None:
        return None
    return {"t": best["t"], "url": best["url"], "masked": bool(best.get("masked")), "source": best.get("source", ""), "dt": abs(best["t"] - time)}


def call_record(n: int, turn: dict[str, Any], frames: list[dict[str, Any]], context: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The numbered record of one turn's tool call, accepted or rejected; None for a turn without one.

    The record is drawn from what the call returned, whatever its tool: `start`/`end` (a span, such
    as crop_video's) with the span's evidence `gain`, duplicate and fragment flags; `time`/`box` (a
    region of one frame, such as zoom's) with its `box_iou` and the `frame` nearest in time among
    `context` to draw the box on; `times` of the frames it returned (`frames`, the turn's viewed
    frames); and always `tool`, `arguments` and `label` (`name(arguments)`). A rejected call keeps
    the arguments as written and the env's `reason`. Version-1 turns (a crop_video action with
    start/end, a call without tool and arguments) read the same.
    """
    action = _action(turn)
    named = tool_call_of(action)
    call = turn.get("call") if isinstance(turn.get("call"), dict) else None
    error = None if turn.get("error") in (None, "") else as_str(turn.get("error"))
    if call is None and not (error and (named is not None or action["type"] == "invalid")):
        return None
    name, written = named if named is not None else ("", {})
    record: dict[str, Any] = {
        "n": n, "turn": turn.get("index"), "index": None, "tool": name, "arguments": written, "label": "",
        "start": None, "end": None, "time": None, "box": None, "box_iou": None, "frame": None,
        "times": [f["t"] for f in frames if f.get("t") is not None],
        "gain": None, "duplicate_of": None, "duplicate_of_n": None, "fragment": False, "clipped": False,
        "rejected": call is None, "reason": error if call is None else None,
    }  # fmt: skip
    if call is not None:
        record["tool"] = as_str(call.get("tool")) or name
        read = call.get("arguments")
        span = {k: call.get(k) for k in ("start", "end") if as_float(call.get(k)) is not None}
        # what the tool read; a version-1 call has no arguments but its (clipped) span
        record["arguments"] = dict(read) if isinstance(read, dict) and read else span or written
        index, dup = call.get("index"), call.get("duplicate_of")
        record.update(index=index if isinstance(index, int) else None, clipped=bool(call.get("clipped")),
                      start=as_float(call.get("start")), end=as_float(call.get("end")),
                      time=as_float(call.get("time")), box=_box(call.get("box")), box_iou=as_float(call.get("box_iou")))
        if record["start"] is not None and record["end"] is not None:
            evidence = as_dict(turn.get("evidence"))
            record.update(gain=as_float(call.get("gain", evidence.get("gain"))), duplicate_of=dup if isinstance(dup, int) else None,
                          fragment=bool(call.get("fragment")))
    else:  # where a rejected call would have looked, from its arguments as written
        record.update(start=as_float(written.get("start")), end=as_float(written.get("end")), time=as_float(written.get("time")),
                      box=_box(written.get("box")))
    if record["time"] is not None and record["box"] is not None:
        record["frame"] = _nearest_frame(record["time"], context)
    record["label"] = call_label(record["tool"], record["arguments"]) if record["tool"] else "invalid call"
    return record


def call_records(turns: list[Any], turn_frames: list[list[dict[str, Any]]], initial_frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The call records of an episode's `turns` (raw turn dicts), numbered from 1 over every attempt.

    `turn_frames` are each turn's viewed frames ({t, url, ...}); a zoom's box is drawn on the nearest
    initial or earlier retrieved frame, so frames of calls that returned a region are not used for
    that. `duplicate_of_n` is the number of the call that `duplicate_of` (an accepted call's index) names.
    """
    calls: list[dict[str, Any]] = []
    context = [{**f, "source": "initial"} for f in initial_frames]
    for turn, frames in zip(turns, turn_frames):
        turn = as_dict(turn)
        record = call_record(len(calls) + 1, turn, frames, context)
        if record is not None:
            calls.append(record)
        if record is None or record["rejected"] or record["box"] is None:
            context.extend({**f, "source": f"turn {turn.get('index')}"} for f in frames)
    numbers = {c["index"]: c["n"] for c in calls if c["index"] is not None}
    for c in calls:
        c["duplicate_of_n"] = numbers.get(c["duplicate_of"])
    return calls


def _turn_view(turn: Any, k: int, frames: FrameResolver) -> dict[str, Any]:
    turn = as_dict(turn)
    index = turn.get("index") if isinstance(turn.get("index"), int) else k
    obs = as_dict(turn.get("observation"))
    assistant = as_str(turn.get("assistant"))
    evidence = as_dict(turn.get("evidence"))
    return {
        "index": index,
        "assistant": assistant,
        "segments": segments(assistant),
        "action": _action(turn),
        "think": turn.get("think") if isinstance(turn.get("think"), str) else None,
        "repairs": [as_str(r) for r in as_list(turn.get("repairs"))],
        "dialect": as_str(turn.get("dialect")),
        "error": None if turn.get("error") in (None, "") else as_str(turn.get("error")),
        "observation": {"text": as_str(obs.get("text")), "frames": frames.frames(obs.get("frames"), f"turn {index}")},
        "evidence": {name: as_float(evidence.get(name)) for name in ("coverage", "precision", "score", "gain")},
        "call": turn.get("call") if isinstance(turn.get("call"), dict) else None,
        "tokens": turn.get("tokens") if isinstance(turn.get("tokens"), dict) else None,
        "forced": turn.get("forced") is True,  # the episode's forced start wrote it, not the policy
    }


def _intervals(value: Any) -> list[list[float]]:
    return [p for p in (_pair(v) for v in as_list(value)) if p is not None]


def _check_types(raw: dict[str, Any]) -> list[str]:
    """Problems with the shape of top-level fields the page relies on."""
    problems = []
    if not isinstance(raw.get("turns"), list):
        problems.append(f"field 'turns' should be a list, got {type(raw.get('turns')).__name__}")
    if not isinstance(raw.get("question"), str):
        problems.append("field 'question' is missing or not text")
    bad = [k for k, v in enumerate(as_list(raw.get("clue_intervals"))) if _pair(v) is None]
    if bad:
        problems.append(f"clue_intervals {bad} are not [start, end] pairs")
    if raw.get("options") is not None and not isinstance(raw.get("options"), list):
        problems.append("field 'options' should be a list or null")
    return problems


def episode_view(raw: Any, root: Path, url_for: Callable[[str], str], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The view model of one episode (see the module docstring); `meta` is merged in (run, index)."""
    meta = dict(meta or {})
    if not isinstance(raw, dict):
        return {**meta, "issues": [f"expected a JSON object, got {type(raw).__name__}"], "turns": [], "calls": []}
    issues: list[str] = []
    version = raw.get("schema_version")
    if version not in SCHEMA_VERSIONS:
        issues.append(f"unknown schema_version {version!r} (this viewer reads {' and '.join(map(str, SCHEMA_VERSIONS))}); showing what it can")
    issues.extend(_check_types(raw))
    frames = FrameResolver(root, url_for)
    initial = as_dict(raw.get("initial"))
    initial_view = {"text": as_str(initial.get("text")), "frames": frames.frames(initial.get("frames"), "initial")}
    turns = [_turn_view(t, k, frames) for k, t in enumerate(as_list(raw.get("turns")))]
    calls = call_records(as_list(raw.get("turns")), [t["observation"]["frames"] for t in turns], initial_view["frames"])
    group = as_dict(raw.get("group"))
    masked = masked_ranges(group.get("perturbation"))
    issues.extend(frames.problems[:MAX_ISSUES])
    if len(frames.problems) > MAX_ISSUES:
        issues.append(f"... and {len(frames.problems) - MAX_ISSUES} more frame problems")
    components = {as_str(k): as_float(v) for k, v in as_dict(raw.get("reward_components")).items()}
    view = {
        **meta,
        "schema_version": version,
        "episode_id": as_str(raw.get("episode_id")),
        "sample_id": as_str(raw.get("sample_id")),
        "policy": as_str(raw.get("policy")),
        "group": {"id": as_str(group.get("id")), "index": group.get("index"), "role": as_str(group.get("role")),
                  "perturbation": group.get("perturbation") if isinstance(group.get("perturbation"), dict) else None},
        "question": as_str(raw.get("question")),
        "options": [as_str(o) for o in as_list(raw.get("options"))] if raw.get("options") is not None else None,
        "answer": as_str(raw.get("answer")),
        "prediction": None if raw.get("prediction") is None else as_str(raw.get("prediction")),
        "correct": raw.get("correct") if isinstance(raw.get("correct"), bool) else None,
        "accuracy": as_float(raw.get("accuracy")),
        "problem_type": as_str(raw.get("problem_type")),
        "task_kind": as_str(raw.get("task_kind")),
        "data_source": as_str(raw.get("data_source")),
        "duration": as_float(raw.get("duration")),
        "video": as_str(raw.get("video")),
        "clue_intervals": _intervals(raw.get("clue_intervals")),
        "key_frames": [kf for kf in as_list(raw.get("key_frames")) if isinstance(kf, dict)],
        "masked_ranges": masked,
        "initial": initial_view,
        "turns": turns,
        "calls": calls,
        "evidence_curve": [{"turn": t["index"], **t["evidence"]} for t in turns if t["evidence"]["score"] is not None],
        "reward": as_float(raw.get("reward")),
        "reward_components": components,
        "advantage": as_float(raw.get("advantage")),
        "terminated": bool(raw.get("terminated")),
        "truncated": bool(raw.get("truncated")),
        "failure": None if raw.get("failure") in (None, "") else as_str(raw.get("failure")),
        "metrics": as_dict(raw.get("metrics")),
        "issues": issues,
    }
    view["axis_end"] = timeline_end(view)
    return view


def timeline_end(view: dict[str, Any]) -> float:
    """The time axis length: the duration, or the latest time any drawn item reaches."""
    if view.get("duration"):
        return float(view["duration"])
    times = [e for _, e in view.get("clue_intervals", [])] + [c["end"] for c in view.get("calls", []) if c.get("end")]
    times += [c["time"] for c in view.get("calls", []) if c.get("time")] + [t for c in view.get("calls", []) for t in c.get("times", [])]
    times += [f["t"] for f in view.get("initial", {}).get("frames", []) if f.get("t") is not None]
    return max(times, default=1.0) or 1.0

"""Turn one raw trajectory (a parsed JSONL line) into the view model the page draws.

The page never interprets the trajectory format itself: this module does, so the format's
reading is in one tested place (docs/architecture.md, "Trajectory files", schema_version 1).
What it derives:

- `calls`: every crop_video attempt in order, numbered from 1, with its span, evidence gain
  (CS-GRPO's g_k = E_k - E_{k-1}, seed 003), and flags: duplicate (tIoU > threshold with an earlier
  call, as recorded by the env), fragment, clipped, rejected (with the env's reason);
- `masked_ranges`: the perturbed time ranges of a DM-GRPO masked group (seed 002), from the
  group's perturbation and from frames marked `masked`;
- `segments` of each assistant turn: think / tool call / answer spans for highlighting;
- `evidence_curve`: coverage, precision and evidence score after each turn;
- `issues`: one line per thing that is wrong (unknown schema version, a missing or unsafe frame
  path, a field of the wrong type). The function never raises on bad content.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from videoseek.viewer.paths import UnsafePath, resolve_inside
from videoseek.viewer.runindex import SCHEMA_VERSION, as_dict, as_float, as_list, as_str

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


def _call_record(n: int, turn: dict[str, Any]) -> dict[str, Any] | None:
    """The numbered crop-call record of one turn, or None if the turn made no call attempt."""
    action = _action(turn)
    call = turn.get("call")
    evidence = as_dict(turn.get("evidence"))
    index = turn.get("index")
    if isinstance(call, dict):
        dup = call.get("duplicate_of")
        return {
            "n": n, "turn": index, "start": as_float(call.get("start")), "end": as_float(call.get("end")),
            "gain": as_float(call.get("gain", evidence.get("gain"))), "duplicate_of": dup if isinstance(dup, int) else None,
            "fragment": bool(call.get("fragment")), "clipped": bool(call.get("clipped")),
            "rejected": False, "reason": None,
        }
    if action["type"] in ("crop_video", "invalid") and turn.get("error"):
        return {
            "n": n, "turn": index, "start": as_float(action.get("start")), "end": as_float(action.get("end")),
            "gain": None, "duplicate_of": None, "fragment": False, "clipped": False,
            "rejected": True, "reason": as_str(turn.get("error")),
        }
    return None


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
    if version != SCHEMA_VERSION:
        issues.append(f"unknown schema_version {version!r} (this viewer reads {SCHEMA_VERSION}); showing what it can")
    issues.extend(_check_types(raw))
    frames = FrameResolver(root, url_for)
    initial = as_dict(raw.get("initial"))
    initial_view = {"text": as_str(initial.get("text")), "frames": frames.frames(initial.get("frames"), "initial")}
    turns = [_turn_view(t, k, frames) for k, t in enumerate(as_list(raw.get("turns")))]
    calls, n = [], 0
    for turn in as_list(raw.get("turns")):
        record = _call_record(n + 1, as_dict(turn))
        if record is not None:
            n += 1
            calls.append(record)
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
    times += [f["t"] for f in view.get("initial", {}).get("frames", []) if f.get("t") is not None]
    return max(times, default=1.0) or 1.0

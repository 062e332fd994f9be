"""A training run folder for the viewer: metrics per step, each step's groups, tokens and probes.

The local GRPO backend (`training/run_csgrpo.py --backend local`) writes:

    RUN/metrics.jsonl                          one JSON object per step (reward, accuracy, kl, entropy, reward/<component>, ...)
    RUN/run.json                               data, reward config and env of the run
    RUN/rollouts/step_NNNN/trajectories.jsonl  that step's episodes (+ frames/)
    RUN/rollouts/step_NNNN/grpo.json           what the update used: groups (rewards, mean, std), per episode its advantage and token counts
    RUN/rollouts/step_NNNN/tokens.jsonl        with --record-tokens: per episode its mask segments, token texts, log-probs
    RUN/probes/step_NNNN/trajectories.jsonl    the fixed probe questions, greedy, every --probe-every steps

Everything here reads untrusted files and never raises on their content: a line that cannot be
used becomes a problem text naming the file and line, shown on the page.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from videoseek.rewards.advantage import group_stats
from videoseek.viewer.episode import call_records
from videoseek.viewer.runindex import as_dict, as_float, as_list, as_str

METRICS = "metrics.jsonl"
STEP_DIR = re.compile(r"^step_(\d+)$")
# The series the training page draws first, in this order; every other numeric key can be picked.
MAIN_SERIES = ("reward", "accuracy", "kl", "entropy", "look_on", "coverage", "calls", "crop_rate", "valid_format", "loss", "grad_norm")


def is_training_run(root: Path) -> bool:
    """A folder the local backend (or verl) trains into: it has metrics.jsonl, rollouts/step_* or probes/step_*,
    or verl's dumps rollouts/<step>.jsonl or probes/<step>.jsonl."""
    from videoseek.viewer.verldump import dump_files

    return (root / METRICS).is_file() or any(bool(step_dirs(root, k)) or bool(dump_files(root, k)) for k in ("rollouts", "probes"))


def step_dirs(root: Path, kind: str) -> dict[int, Path]:
    """{step: folder} of `root/kind/step_NNNN` folders (kind: rollouts or probes)."""
    base = root / kind
    if not base.is_dir():
        return {}
    out = {}
    try:
        entries = list(base.iterdir())
    except OSError:
        return {}
    for entry in entries:
        m = STEP_DIR.match(entry.name)
        if m and entry.is_dir():
            out[int(m.group(1))] = entry
    return dict(sorted(out.items()))


def read_metrics(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, problems) of a metrics.jsonl: each usable line's numbers (non-finite as None) and a
    problem text for each line that is not a JSON object with an integer `step`."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    name = path.name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], [f"{name} not found in {path.parent}"]
    except OSError as exc:
        return [], [f"{name} cannot be read: {exc.strerror}"]
    lines = data.split(b"\n")
    for k, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = k == len(lines)  # no newline after it
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if last:
                problems.append(f"{name} line {k}: truncated last line ({len(raw)} bytes without a newline)")
            else:
                msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
                problems.append(f"{name} line {k}: invalid JSON ({msg})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{name} line {k}: expected a JSON object, got {type(row).__name__}")
            continue
        step = row.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            problems.append(f"{name} line {k}: no integer 'step' (got {step!r})")
            continue
        clean = {"step": step}
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                clean[str(key)] = float(value) if math.isfinite(value) else None
        clean["_line"] = k
        rows.append(clean)
    seen: dict[int, int] = {}
    for row in rows:
        if row["step"] in seen:
            problems.append(f"{name} line {row['_line']}: step {row['step']} again (first on line {seen[row['step']]}); the later line is shown")
        seen.setdefault(row["step"], row["_line"])
    by_step = {r["step"]: r for r in rows}
    return [by_step[s] for s in sorted(by_step)], problems


def read_json(path: Path) -> tuple[Any, str | None]:
    """(parsed JSON, None) or (None, a one-line problem naming the file)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, f"{path.name} not found in {path.parent}"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path.name}: cannot be read ({getattr(exc, 'strerror', None) or exc})"
    except json.JSONDecodeError as exc:
        return None, f"{path.name}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"


def token_row(step_dir: Path, episode_id: str) -> tuple[dict[str, Any] | None, str | None]:
    """The tokens.jsonl row of `episode_id` in a step folder; (None, why) when absent or unreadable."""
    path = step_dir / "tokens.jsonl"
    if not path.is_file():
        return None, "per-token data was not recorded for this step (train with --record-tokens)"
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        return None, f"tokens.jsonl cannot be read: {exc.strerror}"
    bad = None
    for k, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            bad = bad or f"tokens.jsonl line {k}: invalid JSON"
            continue
        if isinstance(row, dict) and row.get("episode_id") == episode_id:
            return row, None
    return None, bad or f"tokens.jsonl has no row for episode {episode_id!r}"


def clean_segments(segments: Any) -> list[dict[str, Any]]:
    """Token segments as the page draws them: kind, n, text or pieces with per-token numbers (None where unusable)."""
    out = []
    for seg in as_list(segments):
        seg = as_dict(seg)
        n = seg.get("n")
        item: dict[str, Any] = {"kind": as_str(seg.get("kind")) or "?", "n": n if isinstance(n, int) and not isinstance(n, bool) else 0}
        if "text" in seg:
            item["text"] = as_str(seg.get("text"))
        if "pieces" in seg:
            item["pieces"] = [as_str(p) for p in as_list(seg.get("pieces"))]
            for key in ("logprobs", "ref_logprobs", "entropy"):
                if key in seg:
                    item[key] = [as_float(v) for v in as_list(seg.get(key))]
        out.append(item)
    return out


def step_groups(rows: list[Any], grpo: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The groups of one step: each with its rollouts (list rows joined with grpo.json's episodes),
    mean, std and where those came from (`grpo.json`, else recomputed from the trajectories)."""
    trained = {as_str(e.get("episode_id")): e for e in as_list(as_dict(grpo).get("episodes")) if isinstance(e, dict)}
    recorded = {as_str(g.get("id")): g for g in as_list(as_dict(grpo).get("groups")) if isinstance(g, dict)}
    groups: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.problem and not r.sample_id:  # an unusable line: listed in the step's problems, not as a group
            continue
        gid = r.group_id or r.sample_id or r.episode_id
        g = groups.setdefault(gid, {"id": gid, "sample_id": r.sample_id, "question": r.question, "rollouts": [], "perturbed": []})
        t = trained.get(r.episode_id, {})
        tokens = as_dict(t.get("tokens"))
        item = {
            "index": r.index, "episode_id": r.episode_id, "group_index": r.group_index, "role": r.role or "origin",
            "correct": r.correct, "prediction": r.prediction, "reward": r.reward, "calls": r.calls, "turns": r.turns,
            "coverage": r.coverage, "problem": r.problem, "failure": r.failure,
            "advantage": as_float(t.get("advantage")) if t else r.advantage, "trained": bool(t),
            "in_baseline": t.get("in_baseline") if t else None,
            "tokens": {k: v for k, v in tokens.items() if isinstance(v, int) and not isinstance(v, bool)},
        }  # fmt: skip
        (g["perturbed"] if r.role == "perturbed" else g["rollouts"]).append(item)
    for gid, g in groups.items():
        rec = recorded.get(gid)
        if rec is not None:
            g["mean"], g["std"], g["n"], g["stats_from"] = as_float(rec.get("mean")), as_float(rec.get("std")), rec.get("n"), "grpo.json"
        else:
            rewards = [x["reward"] for x in g["rollouts"] if isinstance(x["reward"], float) and not x["failure"]]
            g["mean"], g["std"] = group_stats(rewards)
            g["n"], g["stats_from"] = len(rewards), "trajectories"
    return list(groups.values())


def episode_card(raw: Any, row: Any) -> dict[str, Any]:
    """A compact summary of one probe episode for the side-by-side view."""
    raw = as_dict(raw)
    turns = [as_dict(t) for t in as_list(raw.get("turns"))]
    texts = [as_str(t.get("assistant")) for t in turns]
    frames = [[{"t": as_float(as_dict(f).get("t"))} for f in as_list(as_dict(t.get("observation")).get("frames"))] for t in turns]
    calls = call_records(turns, frames, [])
    components = {as_str(k): as_float(v) for k, v in as_dict(raw.get("reward_components")).items()}
    return {
        "index": row.index, "episode_id": row.episode_id, "prediction": row.prediction, "correct": row.correct, "reward": row.reward,
        "reward_components": components, "calls": calls, "turns": texts, "coverage": row.coverage, "problem": row.problem,
        "duration": as_float(raw.get("duration")), "clue_intervals": [c for c in as_list(raw.get("clue_intervals")) if isinstance(c, list) and len(c) == 2],
        "failure": row.failure,
    }  # fmt: skip

"""Write small schema-conformant runs (trajectories.jsonl + JPEG frames) for tests and demos.

The episodes are scripted, not produced by a policy, but every number in them is computed the
way the env defines it: coverage, precision and evidence score E = |R∩C| / |R∪C| over unions of
intervals (CS-GRPO, seed 003) with `videoseek.rewards.intervals`, gains g_k = E_k - E_{k-1}, and
group advantages (r - mean) / (std + eps) as in GRPO (`videoseek.rewards.group_advantages`). Frames are real JPEG files drawn with Pillow
(a colour per second, the timestamp written in), masked frames are black, as DM-GRPO's masked group
zeroes pixels (seed 002). Each sample gets one episode of each kind the viewer must draw: a good
search, a rejected call, a duplicate call, a fragment, a wrong answer, and an optional masked twin.
The calls are of the first built-in tool (`CropVideoTool`, a time span). Runs are written as
trajectory schema 2, or with `schema_version=1` as files of that version were (a crop action with
start/end, the call's `requested` as a pair), for the viewer's compatibility tests.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw
from videoseek.envs.tools import CropVideoTool
from videoseek.rewards.advantage import group_advantages
from videoseek.rewards.intervals import intersection, measure, tiou, union

FRAME_SIZE = (96, 64)
SPAN_TOOL = CropVideoTool.name  # the tool the scripted episodes call


def frame_jpeg(t: float, masked: bool = False) -> bytes:
    """A small JPEG showing time `t` (colour varies with the second); black when masked."""
    if masked:
        img = Image.new("RGB", FRAME_SIZE, (0, 0, 0))
    else:
        sec = math.floor(t)
        img = Image.new("RGB", FRAME_SIZE, ((sec * 47) % 256, (sec * 89) % 256, 160))
        ImageDraw.Draw(img).text((6, 24), f"t={t:.1f}", fill=(255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def evidence_after(calls: list[tuple[float, float]], clues: list[tuple[float, float]]) -> dict[str, float]:
    """Coverage, precision and evidence score (temporal IoU of unions) after `calls`."""
    inter = measure(intersection(calls, clues))
    covered = measure(clues)
    retrieved = measure(calls)
    return {
        "coverage": inter / covered if covered else 0.0,
        "precision": inter / retrieved if retrieved else 0.0,
        "score": tiou(union(calls), union(clues)),
    }


def _frames(run: Path, episode_id: str, tag: str, times: list[float], masked_range: tuple[float, float] | None, write: bool) -> list[dict[str, Any]]:
    folder = run / "frames" / episode_id.replace("/", "__")
    refs = []
    for k, t in enumerate(times):
        masked = masked_range is not None and math.floor(masked_range[0]) <= math.floor(t) <= math.floor(masked_range[1])
        path = None
        if write:
            folder.mkdir(parents=True, exist_ok=True)
            file = folder / f"{tag}_{k}.jpg"
            file.write_bytes(frame_jpeg(t, masked))
            path = file.relative_to(run).as_posix()
        refs.append({"t": round(t, 3), "path": path, "masked": masked})
    return refs


def _span_times(s: float, e: float, n: int = 4) -> list[float]:
    return [s + (e - s) * (k + 0.5) / n for k in range(n)]


def _script(g: int, duration: float, clue: tuple[float, float]) -> list[tuple[str, Any]]:
    """The turns of episode `g`: ("crop", (s, e)) | ("bad", (s, e)) | ("invalid",) | ("think",) | ("answer", letter)."""
    s, e = clue
    if g % 4 == 0:  # a clean search that answers right
        return [("crop", (s - 1, e + 1)), ("answer", "B")]
    if g % 4 == 1:  # a rejected call, then an off-target call, then a wrong answer
        return [("bad", (12.0, 3.0)), ("crop", (e + 2, min(duration, e + 6))), ("answer", "C")]
    if g % 4 == 2:  # a think step, a good call, a near-duplicate, right answer
        return [("think",), ("crop", (s, e)), ("crop", (s + 0.2, e + 0.2)), ("answer", "B")]
    return [("invalid",), ("crop", (s, s + 1.0)), ("crop", (s + 1.0, s + 2.0)), ("answer", "B")]  # a malformed call, adjacent fragments


def _call_action(s: float, e: float, version: int) -> dict[str, Any]:
    """The recorded action of a span call, as trajectory `version` writes it."""
    if version == 1:
        return {"type": SPAN_TOOL, "start": s, "end": e}
    return {"type": "tool_call", "name": SPAN_TOOL, "arguments": {"start": s, "end": e}}


def _episode(run: Path, sample: dict[str, Any], g: int, policy: str, perturbation: dict[str, Any] | None, write_frames: bool,
             version: int = 2) -> dict[str, Any]:
    sid, duration, clue = sample["id"], sample["duration"], tuple(sample["clue_intervals"][0])
    role = "perturbed" if perturbation else "origin"
    episode_id = f"{sid}/mask/g{g}" if perturbation else f"{sid}/g{g}"
    mask = tuple(perturbation["time_range"]) if perturbation else None
    initial_times = [duration * (k + 0.5) / 4 for k in range(4)]
    turns, calls = [], []
    score_before = 0.0
    prediction = None
    for k, step in enumerate(_script(g, duration, clue)):
        turn: dict[str, Any] = {"index": k, "think": None, "repairs": [], "dialect": "hermes", "error": None,
                                "call": None, "tokens": {"prompt": 100 + 40 * k, "completion": 30}}
        obs_times: list[float] = []
        if step[0] == "crop":
            s, e = step[1]
            prior = [tiou([(s, e)], [c]) for c in calls]
            best = max(prior, default=0.0)
            dup = prior.index(best) if best > 0.7 else None
            calls.append((s, e))
            ev = evidence_after(calls, [clue])
            ev["gain"] = ev["score"] - score_before
            score_before = ev["score"]
            call = {"index": len(calls) - 1, "start": s, "end": e, "requested": [s, e], "clipped": False, "gain": ev["gain"],
                    "duplicate_of": dup, "fragment": len(calls) > 1 and dup is None and abs(calls[-2][1] - s) < 1e-9,
                    "best_prior_tiou": best}
            if version != 1:
                call.update(tool=SPAN_TOOL, arguments={"start": s, "end": e}, requested={"start": s, "end": e})
            turn.update(assistant=f"<think>Look at {s:.1f}-{e:.1f}.</think>" + CropVideoTool.call_text({"start": s, "end": e}),
                        action=_call_action(s, e, version), think=f"Look at {s:.1f}-{e:.1f}.", call=call, evidence=ev)
            obs_times = _span_times(s, e)
            obs_text = f"Frames from {s:.1f}s to {e:.1f}s."
        elif step[0] == "bad":  # rejected by the env's semantic check, as VideoSeekEnv words it
            s, e = step[1]
            error = f"{SPAN_TOOL} needs start < end, got start={s:g}, end={e:g}"
            turn.update(assistant=CropVideoTool.call_text({"start": s, "end": e}),
                        action=_call_action(s, e, version), error=error, evidence={**evidence_after(calls, [clue]), "gain": None})
            obs_text = f"Error: {error}"
        elif step[0] == "invalid":  # malformed JSON that the lenient parser could not repair
            reason = "tool call arguments are not valid JSON"
            turn.update(assistant=f"<tool_call>{{'name': '{SPAN_TOOL}', 'arguments': {{'start': 1,</tool_call>",
                        action={"type": "invalid", "reason": reason}, error=reason, repairs=["single quotes replaced by double quotes"],
                        evidence={**evidence_after(calls, [clue]), "gain": None})
            obs_text = f"Error: {reason}."
        elif step[0] == "think":
            turn.update(assistant="<think>The clue is probably in the middle.</think>", action={"type": "think"},
                        think="The clue is probably in the middle.", evidence={**evidence_after(calls, [clue]), "gain": None})
            obs_text = "Continue."
        else:
            prediction = step[1]
            turn.update(assistant=f"<think>The object moves left.</think><answer>{prediction}</answer>",
                        action={"type": "answer", "text": prediction}, think="The object moves left.",
                        evidence={**evidence_after(calls, [clue]), "gain": None})
            obs_text = ""
        turn["observation"] = {"text": obs_text, "frames": _frames(run, episode_id, f"t{k}", obs_times, mask, write_frames)}
        turns.append(turn)
    correct = prediction == sample["answer"]
    components = {"accuracy": float(correct), "format": 1.0, "clue_seek": round(evidence_after(calls, [clue])["coverage"] * 0.5, 6)}
    return {
        "schema_version": version, "episode_id": episode_id, "sample_id": sid, "policy": policy,
        "group": {"id": sid, "index": g, "role": role, "perturbation": perturbation},
        "question": sample["question"], "options": sample["options"], "answer": sample["answer"],
        "problem_type": sample["problem_type"], "duration": duration, "clue_intervals": [list(clue)],
        "key_frames": [], "data_source": "fixture", "task_kind": sample["task_kind"],
        "video": f"videos/{sid}.mp4",
        "initial": {"text": f"Question: {sample['question']}", "frames": _frames(run, episode_id, "init", initial_times, mask, write_frames)},
        "turns": turns, "prediction": prediction, "correct": correct, "accuracy": float(correct),
        "reward": round(sum(components.values()), 6), "reward_components": components, "advantage": None,
        "terminated": True, "truncated": False, "failure": None, "metrics": {"calls": len(calls)},
    }


def fixture_samples(n: int) -> list[dict[str, Any]]:
    """`n` sample dicts (id, question, options, answer, duration, clue interval, task kind)."""
    kinds = ["direction", "speed"]
    types = ["multiple_choice", "multiple_choice", "numerical"]
    return [
        {"id": f"s{i:05d}", "question": f"Which way does the red square move in clip {i}?",
         "options": ["A. up", "B. left", "C. right", "D. down"], "answer": "B",
         "problem_type": types[i % len(types)], "task_kind": kinds[i % len(kinds)],
         "duration": 20.0 + i % 7, "clue_intervals": [[6.0 + i % 5, 10.0 + i % 5]]}
        for i in range(n)
    ]


def _with_advantages(episodes: list[dict[str, Any]]) -> None:
    for ep, a in zip(episodes, group_advantages([ep["reward"] for ep in episodes])):
        ep["advantage"] = round(float(a), 6)


def write_fixture_run(run_dir: str | Path, n_samples: int = 3, group_size: int = 4, policy: str = "oracle",
                      perturbed: bool = True, write_frames: bool = True, schema_version: int = 2) -> Path:
    """Write `run_dir/trajectories.jsonl` (+ `frames/`) and return the path of the JSONL file.

    Each sample gets `group_size` origin episodes and, with `perturbed`, as many masked ones whose
    mask covers the clue interval. With `write_frames=False` frame refs have `path: null` (fast
    large runs for index tests). `schema_version=1` writes the episodes as version-1 files held them.
    """
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    out = run / "trajectories.jsonl"
    with out.open("w", encoding="utf-8") as fh:
        for sample in fixture_samples(n_samples):
            group = [_episode(run, sample, g, policy, None, write_frames, schema_version) for g in range(group_size)]
            if perturbed:
                mask = {"kind": "mask", "time_range": list(sample["clue_intervals"][0]), "oracle_correct": False}
                group += [_episode(run, sample, g, policy, mask, write_frames, schema_version) for g in range(group_size)]
            _with_advantages(group[:group_size])  # only the origin group gets GRPO advantages
            for ep in group:
                fh.write(json.dumps(ep) + "\n")
    return out


def write_compare_runs(base: str | Path, n_samples: int = 2, group_size: int = 4) -> tuple[Path, Path]:
    """Two runs over the same samples for the compare view: A (oracle, with masked groups) and
    B (uniform, no perturbed groups) whose g0 episodes answer wrongly."""
    base = Path(base)
    run_a, run_b = base / "run_a", base / "run_b"
    write_fixture_run(run_a, n_samples=n_samples, group_size=group_size)
    write_fixture_run(run_b, n_samples=n_samples, group_size=group_size, policy="uniform", perturbed=False)
    episodes = [json.loads(x) for x in (run_b / "trajectories.jsonl").read_text().split("\n") if x.strip()]
    for ep in episodes:
        if ep["episode_id"].endswith("/g0"):
            ep["correct"], ep["prediction"], ep["accuracy"] = False, "D", 0.0
            ep["reward_components"]["accuracy"] = 0.0
            ep["reward"] = round(sum(ep["reward_components"].values()), 6)
    for sid in dict.fromkeys(ep["sample_id"] for ep in episodes):  # the group advantages follow the changed rewards
        _with_advantages([ep for ep in episodes if ep["sample_id"] == sid])
    (run_b / "trajectories.jsonl").write_text("".join(json.dumps(ep) + "\n" for ep in episodes))
    return run_a, run_b

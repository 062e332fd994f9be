"""Helpers shared by the multiple-choice benchmark metrics: pairing a run's trajectories with the
benchmark samples, the answer text each official script reads, and markdown tables.

Which episode counts: the first origin episode (lowest group index) of each sample; perturbed
groups and further group members are not a benchmark answer. Samples without an episode are left
out, as the official scripts leave out questions missing from the results file. A failed episode
counts as an answer-less one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory


def scored(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample], name: str) -> list[tuple[Trajectory, VideoSample, dict[str, Any]]]:
    """(trajectory, sample, benchmark record) for each sample's first origin episode, in run order.

    ValueError naming the sample when an episode's sample is unknown or was not converted from
    benchmark `name` (its ``metadata.data_source`` / ``metadata.benchmark`` are checked)."""
    first: dict[str, Trajectory] = {}
    for t in trajectories:
        if t.group.role != "origin":
            continue
        if t.sample_id not in first or t.group.index < first[t.sample_id].group.index:
            first[t.sample_id] = t
    out = []
    for sid, t in first.items():
        sample = samples.get(sid)
        if sample is None:
            raise ValueError(f"episode {t.episode_id}: sample {sid!r} is not in the dataset")
        record = sample.metadata.get("benchmark")
        if not isinstance(record, dict) or sample.data_source != name:
            raise ValueError(f"sample {sid!r}: not converted from {name} (videoseek convert --from {name}); "
                             f"data_source is {sample.data_source!r}")  # fmt: skip
        out.append((t, sample, record))
    return out


def answer_text(traj: Trajectory) -> str:
    """The episode's final answer: the text of its ``<answer>`` ("" when it gave none)."""
    return traj.prediction if traj.failure is None and traj.prediction is not None else ""


def final_turn_text(traj: Trajectory) -> str:
    """The whole last assistant turn (think, answer tags and all); "" for a failed or empty episode."""
    if traj.failure is not None or not traj.turns:
        return ""
    return traj.turns[-1].assistant


def pct(correct: float, total: float) -> float:
    """100 * correct / total, 0 when total is 0 (as the official scripts print empty categories)."""
    return 100.0 * correct / total if total else 0.0


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 1) -> str:
    """A markdown table; floats with `digits` decimals, None as "-"."""

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" if k == 0 else "---:" for k in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def recall_and_miou(ious: Sequence[float], thresholds: Sequence[float]) -> dict[str, float]:
    """The moment-retrieval numbers both Charades scorers print, in percent: `IOU@3` (R1@0.3, the
    share of queries with IoU >= 0.3), ... and `mIOU` (the mean IoU); 0 for no queries.

    >>> recall_and_miou([0.2, 0.6], (0.3, 0.5))
    {'IOU@3': 50.0, 'IOU@5': 50.0, 'mIOU': 40.0}
    """
    total = len(ious)
    out = {f"IOU@{int(thr * 10)}": sum(1 for v in ious if v >= thr) * 100 / total if total else 0 for thr in thresholds}
    out["mIOU"] = sum(ious) * 100 / total if total else 0
    return out

"""Helpers shared by the benchmark metrics: pairing a run's trajectories with the benchmark
samples, the answer text each official script reads, markdown tables, and the moment-retrieval
numbers and table of the two Charades scorers.

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


def benchmark_answers(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample], name: str) -> dict[str, tuple[VideoSample, str | None]]:
    """sample id -> (sample, final answer text or None), one episode a sample: its first origin
    episode (group index 0; later ones of a group are ignored, as a benchmark asks once). A
    trajectory whose sample is missing from `samples` or is not a `name` sample is a ValueError.
    The pairing of the grounding scorers (charades-sta, charades-timelens, vstar), which check
    ``metadata.benchmark.name``; `scored` is the multiple-choice scorers' (``data_source``)."""
    chosen: dict[str, Trajectory] = {}
    for t in trajectories:
        if t.group.role != "origin":
            continue
        if t.sample_id not in samples:
            raise ValueError(f"episode {t.episode_id}: sample {t.sample_id!r} is not in the run's data")
        bench = samples[t.sample_id].metadata.get("benchmark")
        if not isinstance(bench, dict) or bench.get("name") != name:
            raise ValueError(f"sample {t.sample_id!r} is not a {name} sample (no metadata.benchmark.name == {name!r}; "
                             f"convert the data with `videoseek convert --from {name}`)")
        if t.sample_id not in chosen or t.group.index < chosen[t.sample_id].group.index:
            chosen[t.sample_id] = t
    return {sid: (samples[sid], None if t.failure else t.prediction) for sid, t in chosen.items()}


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


def moment_retrieval_table(title: str, metrics: dict[str, Any], note: str) -> str:
    """The table temporal-grounding papers print (TimeChat, lmms-eval, TimeLens-Bench): one row
    ``| all | n | R1@0.3 | R1@0.5 | R1@0.7 | mIoU |`` in percent with 2 decimals, headed by the
    benchmark's `title`, then `note` (what the answers could not give) as a line of its own.
    Both Charades scorers (charades-sta, charades-timelens) print theirs with it.

    >>> print(moment_retrieval_table("Charades-STA", {"n": 2, "IOU@3": 50.0, "IOU@5": 50.0, "IOU@7": 0.0, "mIOU": 40.0}, "ok."))
    | Charades-STA | n | R1@0.3 | R1@0.5 | R1@0.7 | mIoU |
    |---|---|---|---|---|---|
    | all | 2 | 50.00 | 50.00 | 0.00 | 40.00 |
    <BLANKLINE>
    ok.
    """
    row = " | ".join(f"{metrics[k]:.2f}" for k in ("IOU@3", "IOU@5", "IOU@7", "mIOU"))
    return (f"| {title} | n | R1@0.3 | R1@0.5 | R1@0.7 | mIoU |\n"
            "|---|---|---|---|---|---|\n"
            f"| all | {metrics['n']} | {row} |\n\n"
            f"{note}")  # fmt: skip

"""Charades-TimeLens metrics as TimeLens computes them: R1@0.3, R1@0.5, R1@0.7 and mIoU, in percent.

Official script: ``evaluation/compute_metrics.py`` of github.com/TencentARC/TimeLens (commit
5d90c067246ddb11db3203adbb0085bdc48d9e5e), with ``extract_time`` and ``iou`` of
``timelens/utils.py``. Its README prescribes, for a model outside its codebase, a results file of
raw answers (``{"vid.mp4>>>query>>>[s, e]": {"answers": text}}``): the script then reads each
answer with ``extract_time`` and scores the first pair. That is ``protocol="raw"``, the default and
what ``videoseek eval --benchmark charades-timelens`` computes.

TimeLens's own inference script (``evaluation/eval_dataloader.py``) stores ``timestamps`` instead:
``extract_time``'s pairs rounded to whole seconds (Python's ``round``, the dataset's ``UNIT`` 1.0),
and ``[duration + 10, duration + 20]`` for an answer with none; ``compute_metrics.py`` then scores
those. That is ``protocol="timelens-inference"`` (Python API only). Both give IoU 0 to an
unreadable answer; they differ on answers whose times are not whole seconds.

lmms-eval's Charades-STA scorer (`videoseek.agents.benchmarks.charades_sta`) reads answers
differently (sentence filtering, "to" made "-", reversed moments swapped): a paper's
"Charades-TimeLens" column is this module's number, its "Charades-STA" column that one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from videoseek.agents.benchmarks._common import recall_and_miou
from videoseek.agents.benchmarks.charades_sta import benchmark_answers
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory

NAME = "charades-timelens"
THRESHOLDS = (0.3, 0.5, 0.7)
PROTOCOLS = ("raw", "timelens-inference")
SCRIPT = "TencentARC/TimeLens evaluation/compute_metrics.py + timelens/utils.py extract_time @ 5d90c06"
UNPARSEABLE = (-100.0, -100.0)  # compute_metrics.py's moment for an answer extract_time cannot read

_CLOCK = re.compile(r"\b(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?|\d{1,2}:\d{2}(?:\.\d+)?)\b")
_RANGES = (re.compile(r"(\d+\.?\d*)\s*-\s*(\d+\.?\d*)"), re.compile(r"(\d+\.?\d*)\s+to\s+(\d+\.?\d*)"))
_NUMBER = re.compile(r"\b(\d+\.\d+|\d+)\b")


def _clock_seconds(text: str) -> float:
    parts = text.split(":")
    if len(parts) == 3:
        return int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])
    return int(parts[0]) * 60 + float(parts[1])


def extract_time(text: str) -> list[tuple[float, float]]:
    """Every (start, end) pair TimeLens's ``extract_time`` reads from a model's answer.

    Lower-cased, the first rule that finds something wins: clock times (``HH:MM:SS[.f]`` or
    ``MM:SS[.f]``), an even number of them, paired in order; else every ``a - b``, else every
    ``a to b``; else all numbers, an even number of them, paired in order. Pairs are kept as read
    (a reversed pair is not swapped).

    >>> extract_time("The event happens in 24.3 - 30.4 seconds.")
    [(24.3, 30.4)]
    >>> extract_time("It starts at 00:12 and ends at 00:01:05.5")
    [(12.0, 65.5)]
    >>> extract_time("Start: 9 seconds. End: 2 seconds.")
    [(9.0, 2.0)]
    >>> extract_time("no idea")
    []
    """
    paragraph = text.lower()
    clocks = _CLOCK.findall(paragraph)
    clocks = [_clock_seconds(t) for t in clocks[: len(clocks) // 2 * 2]]
    pairs = [(clocks[i], clocks[i + 1]) for i in range(0, len(clocks), 2)]
    if not pairs:
        for pattern in _RANGES:
            found = pattern.findall(paragraph)
            if found:
                pairs = [(float(a), float(b)) for a, b in found]
                break
    if not pairs:
        numbers = _NUMBER.findall(paragraph)
        numbers = [float(n) for n in numbers[: len(numbers) // 2 * 2]]
        pairs = [(numbers[i], numbers[i + 1]) for i in range(0, len(numbers), 2)]
    return pairs


def moment_iou(gt: Sequence[float], pred: Sequence[float]) -> float:
    """TimeLens's ``iou(gt, pred)``: ``max(min_end - max_start, 0) / (max_end - min_start)``, the
    ends taken as given; 0 where the script would divide by zero (both moments the same instant).

    >>> moment_iou([2, 6], [4, 8])
    0.3333333333333333
    >>> moment_iou([2, 6], (-100, -100))
    0.0
    """
    max0, min0 = max(gt[0], pred[0]), min(gt[0], pred[0])
    max1, min1 = max(gt[1], pred[1]), min(gt[1], pred[1])
    denom = max1 - min0
    return 0.0 if denom == 0 else max(min1 - max0, 0) / denom


def predicted_moment(text: str | None, duration: float, protocol: str = "raw") -> tuple[float, float]:
    """The moment compute_metrics.py scores for one answer (None: the episode gave none, read as "").

    ``raw``: the first pair of ``extract_time``, ``(-100, -100)`` when there is none.
    ``timelens-inference``: eval_dataloader.py's stored timestamps, ``[duration + 10, duration + 20]``
    when there is none, each end rounded to whole seconds; then the first pair.

    >>> predicted_moment("from 3.5 to 7.5", 30.0, "timelens-inference")
    (4.0, 8.0)
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    pairs = extract_time(text or "")
    if protocol == "raw":
        return pairs[0] if pairs else UNPARSEABLE
    if not pairs:
        pairs = [(duration + 10, duration + 20)]
    start, end = pairs[0]
    return float(round(start)), float(round(end))  # round(t / UNIT) * UNIT, UNIT = 1.0


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample], protocol: str = "raw") -> dict[str, Any]:
    """R1@0.3/0.5/0.7 (``IOU@3``, ``IOU@5``, ``IOU@7``) and ``mIOU``, in percent of the queries, as
    compute_metrics.py: per query the IoU of `predicted_moment` with the annotated span; R1@m the
    share with IoU >= m; mIoU the mean IoU; ``unparseable`` counts the answers extract_time could not
    read, ``reversed`` the scored moments with start >= end (the script warns for each, the
    (-100, -100) of an unreadable answer included; IoU 0 or less than it looks). Over the queries the run answered (the samples with an origin episode)."""
    answers = benchmark_answers(trajectories, samples, NAME)
    ious: list[float] = []
    unparseable = reversed_ = 0
    for sid in sorted(answers):
        sample, text = answers[sid]
        bench = sample.metadata["benchmark"]
        gt = (float(bench["span"][0]), float(bench["span"][1]))
        if not extract_time(text or ""):
            unparseable += 1
        moment = predicted_moment(text, float(bench["duration"]), protocol)
        reversed_ += moment[0] >= moment[1]
        ious.append(moment_iou(gt, moment))
    total = len(ious)
    out: dict[str, Any] = {"benchmark": NAME, "protocol": protocol, "n": total, "unparseable": unparseable, "reversed": reversed_}
    out.update(recall_and_miou(ious, THRESHOLDS))
    out["script"] = SCRIPT
    return out


def format_table(metrics: dict[str, Any]) -> str:
    """TimeLens-Bench's table: R1@0.3 | R1@0.5 | R1@0.7 | mIoU."""
    row = " | ".join(f"{metrics[k]:.2f}" for k in ("IOU@3", "IOU@5", "IOU@7", "mIOU"))
    return ("| Charades-TimeLens | n | R1@0.3 | R1@0.5 | R1@0.7 | mIoU |\n"
            "|---|---|---|---|---|---|\n"
            f"| all | {metrics['n']} | {row} |\n\n"
            f"{metrics['unparseable']} of {metrics['n']} answers had no readable moment, {metrics['reversed']} a reversed one "
            f"(protocol {metrics['protocol']}).")

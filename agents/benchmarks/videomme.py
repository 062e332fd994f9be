"""Video-MME's official metrics (``evaluation/eval_your_results.py`` of
github.com/MME-Benchmarks/Video-MME, last version: commit 4e7566d, 2024-06-03; the file was later
removed from the repository, commit 49a2e67).

The script reads the model's response to each question, extracts one letter with
`extract_characters_regex`, and counts a question only when a letter was extracted: every
accuracy is ``correct / answered`` (questions with no letter are left out of the denominator).
Accuracies are per length class (short, medium, long) and over the whole set, overall and by
video category (domain), sub-category and task type; "overall" sums the counts (micro average),
it does not average the categories.

Here a question's response is the episode's final ``<answer>`` text (the agent's answer; "" when
it gave none, which, as in the script, leaves the question out of ``answered``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from videoseek.agents.benchmarks._common import answer_text, markdown_table, pct, scored
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory

NAME = "videomme"
DURATIONS = ("short", "medium", "long")
# The script's CATEGORIES and TASK_CATEGORIES, in its order (rows of the printed tables).
CATEGORIES = ("Knowledge", "Film & Television", "Sports Competition", "Artistic Performance", "Life Record", "Multilingual")
TASK_CATEGORIES = (
    "Temporal Perception", "Spatial Perception", "Attribute Perception", "Action Recognition", "Object Recognition",
    "OCR Problems", "Counting Problem", "Temporal Reasoning", "Spatial Reasoning", "Action Reasoning",
    "Object Reasoning", "Information Synopsis",
)  # fmt: skip
# eval_your_results.py's answer_prefixes, as written: two commas are missing there, so Python joins
# "The best option is" + "The correct option is" and "Best answer:" + "Best option:" into one string each.
ANSWER_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",
    "Best answer:Best option:",
)


def extract_characters_regex(s: str) -> str:
    """The option letter of a response, as eval_your_results.py's ``extract_characters_regex``:
    strip, delete the answer prefixes, then the first of A-D anywhere in what is left ("" when there
    is none; a response of more than 10 words without one is "" too).

    >>> extract_characters_regex("The answer is (C) Berries."), extract_characters_regex("no idea")
    ('C', '')
    """
    s = s.strip()
    for prefix in ANSWER_PREFIXES:
        s = s.replace(prefix, "")
    if len(s.split()) > 10 and not re.search("[ABCD]", s):
        return ""
    m = re.search(r"[ABCD]", s)
    return "" if m is None else m[0]


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """Video-MME accuracies (percent) as eval_your_results.py computes them (module docstring).

    Keys: ``overall``; ``by_duration[d]`` with ``overall``, ``domain``, ``sub_category``,
    ``task_type``; the same breakdowns over the whole set; counts ``questions``, ``answered``,
    ``correct``."""
    # (duration, breakdown, name) -> [correct, answered]
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    seen: dict[str, set[str]] = defaultdict(set)
    questions = 0
    for traj, _sample, rec in scored(trajectories, samples, NAME):
        questions += 1
        d = rec["duration"]
        keys = {"domain": rec["domain"], "sub_category": rec["sub_category"], "task_type": rec["task_type"]}
        for kind, value in keys.items():
            seen[kind].add(value)
        letter = extract_characters_regex(answer_text(traj))
        if letter == "":
            for kind, value in keys.items():
                counts[(d, kind, value)]  # a category with questions is reported even with none answered
            continue
        hit = int(letter == rec["answer"])
        for kind, value in keys.items():
            c = counts[(d, kind, value)]
            c[0] += hit
            c[1] += 1

    def order(kind: str) -> list[str]:
        canon = {"domain": CATEGORIES, "task_type": TASK_CATEGORIES}.get(kind, ())
        return [n for n in canon if n in seen[kind]] + sorted(seen[kind] - set(canon))

    def acc(durations: Sequence[str], kind: str, value: str | None = None) -> float:
        cs = [c for (d, k, v), c in counts.items() if d in durations and k == kind and (value is None or v == value)]
        return pct(sum(c[0] for c in cs), sum(c[1] for c in cs))

    present = [d for d in DURATIONS if any(k[0] == d for k in counts)]
    out: dict[str, Any] = {"benchmark": NAME, "scale": "percent", "questions": questions}
    out["answered"] = sum(c[1] for (d, k, v), c in counts.items() if k == "task_type")
    out["correct"] = sum(c[0] for (d, k, v), c in counts.items() if k == "task_type")
    out["overall"] = acc(DURATIONS, "task_type")
    out["by_duration"] = {
        d: {"overall": acc([d], "task_type"), **{kind: {v: acc([d], kind, v) for v in order(kind)} for kind in ("domain", "sub_category", "task_type")}}
        for d in present
    }  # fmt: skip
    for kind in ("domain", "sub_category", "task_type"):
        out[kind] = {v: acc(DURATIONS, kind, v) for v in order(kind)}
    return out


def format_table(metrics: dict[str, Any]) -> str:
    """Video-MME's main table (accuracy by length, w/o subtitles: Short, Medium, Long, Overall),
    then accuracy by task type and by video category over the whole set."""
    by = metrics["by_duration"]
    main = markdown_table(["Short", "Medium", "Long", "Overall"], [[*(by[d]["overall"] if d in by else None for d in DURATIONS), metrics["overall"]]])
    tasks = markdown_table(["Task type", "Acc"], [[k, v] for k, v in metrics["task_type"].items()])
    domains = markdown_table(["Video category", "Acc"], [[k, v] for k, v in metrics["domain"].items()])
    note = f"{metrics['answered']} of {metrics['questions']} questions answered with a letter (the accuracies' denominator)."
    return "\n\n".join([main, tasks, domains, note])

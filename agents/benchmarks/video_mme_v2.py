"""Video-MME-v2's official metrics (``evaluation/test_video_mme_v2.py`` of
github.com/MME-Benchmarks/Video-MME-v2, commit b24176a14506c48a9f3e156d9f20068db6c4782b:
``extract_characters_regex_v2``, ``evaluate``, ``cal_relevance``, ``cal_logic``, ``get_final_rating``).

Each reply is read by ``extract_characters_regex_v2`` (answer prefixes deleted, then the first of
A-H; a reply of more than ten words with none is ""); a question scores 1 when the letter is the
answer, 0 when it is another, and **-1 when no letter was read** (an empty reply too). The
questions form groups of four, the rows ``4g .. 4g + 3`` of the file, rated non-linearly:

- relevance groups (``cal_relevance``): the sum of the four scores (a -1 takes one off) maps
  0/1/2/3/4 to 0, 100/16, 400/16, 900/16, 100 (any other sum 0); ``relevance_linear_score`` is
  25 x the sum;
- logic groups (``cal_logic``): the length of the chain of leading truthy scores (-1 is truthy in
  Python, so an unread answer continues the chain, as in the script) through the group's
  structure: ``[1, 2, 3, 4]`` 0, 100/16, 400/16, 900/16, 100; ``[1, [2, 3], 4]`` 0, 100/12, 400/12,
  700/12, 100 (a chain stopped at question 2 goes on when question 3 is right); ``[[1, 2], 3, 4]``
  0, 10, 20, 50, 100 (a chain stopped at question 1 counts 1 when question 2 is right).

``total`` is the mean rating of all groups, ``level_1..3`` by the group's level,
``relevance_score`` / ``logic_score`` by type, and the second- and third-head breakdowns (each
group's fields are those of its last question). ``simple_accuracy`` is the script's "Simple
accuracy (valid only)": the mean score of the questions with a letter.

Here a reply is the episode's final ``<answer>`` text ("" when it gave none). A group is rated only
when the run answered all four of its questions (the script needs a reply per row; a run cut
short by ``rollout --limit`` leaves its last groups out, counted in ``groups_incomplete``).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from videoseek.agents.benchmarks._common import answer_text, markdown_table, pct, scored
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory

NAME = "video-mme-v2"
ANSWER_PREFIXES = (
    "Final Answer:", "The best answer is", "The correct answer is", "The answer is", "The answer",
    "The best option is", "The correct option is", "Best answer:", "Best option:", "Answer:", "Option:",
)  # fmt: skip
RATING_KEYS = ("level_1", "level_2", "level_3", "relevance_score", "relevance_linear_score", "logic_score", "total")
_SQUARES_16 = {0: 0.0, 1: 100.0 / 16, 2: 100.0 * 4 / 16, 3: 100.0 * 9 / 16, 4: 100.0}


def extract_letter(reply: str) -> str:
    """``extract_characters_regex_v2``: the letter A-H of a reply, "" when there is none.

    >>> extract_letter("Final Answer: G."), extract_letter("(h) maybe"), extract_letter("the answer is b")
    ('G', '', '')
    """
    s = reply.strip()
    for prefix in ANSWER_PREFIXES:
        s = s.replace(prefix, "")
    if len(s.split()) > 10 and not re.search("[A-H]", s):
        return ""
    m = re.search(r"[A-H]", s)
    return "" if m is None else m[0]


def question_score(reply: str, answer: str) -> int:
    """1 right, 0 wrong, -1 no letter read (the script's ``score`` column)."""
    extracted = extract_letter(reply)
    return int(extracted == answer) if extracted else -1


def relevance_rating(scores: Sequence[int]) -> tuple[float, float]:
    """``cal_relevance``: (non-linear rating, linear rating) of a relevance group's four scores."""
    total = sum(scores)
    return _SQUARES_16.get(total, 0.0), total * 25.0


def logic_rating(scores: Sequence[int], group_structure: str) -> float:
    """``cal_logic``: the rating of a logic group's chain of leading truthy scores.

    >>> logic_rating([1, 0, 1, 0], "[1, [2, 3], 4]"), logic_rating([-1, 1, 0, 1], "[1, 2, 3, 4]")
    (33.333333333333336, 25.0)
    """
    structure = ast.literal_eval(group_structure)
    last = -1
    for idx, val in enumerate(scores):
        if val:
            last = idx
        else:
            break
    if structure == [1, 2, 3, 4]:
        table = _SQUARES_16
    elif structure == [1, [2, 3], 4]:
        table = {0: 0.0, 1: 100.0 / 12, 2: 100.0 * 4 / 12, 3: 100.0 * 7 / 12, 4: 100.0}
        if last == 0 and scores[2]:
            last += 1
    elif structure == [[1, 2], 3, 4]:
        table = {0: 0.0, 1: 100.0 / 10, 2: 100.0 * 2 / 10, 3: 100.0 * 5 / 10, 4: 100.0}
        if last == -1 and scores[1]:
            last += 1
    else:
        raise ValueError(f"unknown group_structure {group_structure!r}")
    return table.get(last + 1, 0.0)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """The script's ``final_rating``, ``second_head_rating`` and ``third_head_rating`` (percent-like
    ratings, 0-100) and its simple accuracy (module docstring)."""
    by_index: dict[int, tuple[int, dict[str, Any]]] = {}
    for traj, sample, rec in scored(trajectories, samples, NAME):
        by_index[int(rec["index"])] = (question_score(answer_text(traj), sample.answer), rec)
    groups: dict[int, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for index in sorted(by_index):
        groups[index // 4].append(by_index[index])
    rating: dict[str, list[float]] = {k: [] for k in RATING_KEYS}
    second: dict[str, list[float]] = {}
    third: dict[str, list[float]] = {}
    complete = [g for g in sorted(groups) if len(groups[g]) == 4]
    for g in complete:
        scores = [s for s, _ in groups[g]]
        last = groups[g][-1][1]
        if last["group_type"] == "relevance":
            value, linear = relevance_rating(scores)
            rating["relevance_score"].append(value)
            rating["relevance_linear_score"].append(linear)
        else:
            value = logic_rating(scores, str(last["group_structure"]))
            rating["logic_score"].append(value)
        level = last.get("level")
        if level is not None and str(level) != "None":
            rating[f"level_{int(level)}"].append(value)
        rating["total"].append(value)
        second.setdefault(str(last.get("second_head")), []).append(value)
        third.setdefault(str(last.get("third_head")), []).append(value)
    valid = [s for s, _ in by_index.values() if s >= 0]
    return {
        "benchmark": NAME, "scale": "percent", "questions": len(by_index), "groups": len(complete),
        "groups_incomplete": len(groups) - len(complete), "unread": sum(1 for s, _ in by_index.values() if s < 0),
        "simple_accuracy": pct(sum(valid), len(valid)),
        "final_rating": {k: _mean(v) for k, v in rating.items()},
        "second_head_rating": {k: _mean(v) for k, v in second.items()},
        "third_head_rating": {k: _mean(v) for k, v in third.items()},
        "script": "MME-Benchmarks/Video-MME-v2 evaluation/test_video_mme_v2.py @ b24176a",
    }  # fmt: skip


def format_table(metrics: dict[str, Any]) -> str:
    """The script's final rating (non-linear group scores), then the second-head breakdown."""
    fr = metrics["final_rating"]
    headers = ["Overall", "Level 1", "Level 2", "Level 3", "Relevance", "Relevance (linear)", "Logic"]
    keys = ["total", "level_1", "level_2", "level_3", "relevance_score", "relevance_linear_score", "logic_score"]
    out = markdown_table(headers, [[fr[k] for k in keys]], digits=2)
    heads = metrics["second_head_rating"]
    if any(k != "None" for k in heads):
        out += "\n\n" + markdown_table(list(heads), [list(heads.values())], digits=2)
    return (out + f"\n\n{metrics['groups']} groups of 4 ({metrics['groups_incomplete']} incomplete left out); "
            f"{metrics['unread']} replies without a letter (score -1); simple accuracy {metrics['simple_accuracy']:.2f}.")

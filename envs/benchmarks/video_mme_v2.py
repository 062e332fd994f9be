"""Video-MME-v2 (MME-Benchmarks/Video-MME-v2) -> `VideoSample` rows.

Source: ``test.parquet`` of the Hugging Face dataset MME-Benchmarks/Video-MME-v2, 3,200 questions,
read as github.com/MME-Benchmarks/Video-MME-v2 ``evaluation/test_video_mme_v2.py`` (commit
b24176a14506c48a9f3e156d9f20068db6c4782b) reads it: one row per question, ``video_id``,
``question``, ``options`` (eight, ``A. ...`` to ``H. ...``; the script writes ``question + "\n" +
options``), ``answer`` (the letter), and the group fields ``level``, ``group_type`` (relevance |
logic), ``group_structure`` (``[1, 2, 3, 4]``, ``[1, [2, 3], 4]`` or ``[[1, 2], 3, 4]``),
``second_head``, ``third_head``. The script's ``index`` is the row's position, and its groups are
the rows ``4g .. 4g + 3`` in file order: the position is kept as ``metadata.benchmark.index`` and the
sample id is ``{index}`` (the script's own key).

Videos are ``{video_id}.mp4`` under ``--video-root``. Without ``--subtitles`` this is the
subtitle-free setting (the script's default); with ``--subtitles DIR`` the script's concatenated
mode: ``DIR/{video_id}.jsonl``'s words joined into ``WITH_SUB_PROMPT``, kept as
``metadata.subtitle_prompt`` and given before the first observation (`videoseek.envs.subtitles`); with ``--subtitle-mode
interleaved`` its interleaved mode: the words grouped into segments (``metadata.subtitle_segments``),
listed by the env with the frames they fall between. Video-MME-v2 has no clue intervals. `videoseek.envs.benchmarks.video_mme_v2`
scores the answers with the script's grouped non-linear rating.

Official metric. Video-MME-v2's official metrics (``evaluation/test_video_mme_v2.py`` of
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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text
from videoseek.envs.benchmarks._scoring import answer_text, markdown_table, pct, scored
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, iter_records
from videoseek.envs.subtitles import group_segments, read_word_jsonl, v2_concatenated_prompt
from videoseek.envs.trajectory import Trajectory

NAME = "video-mme-v2"
SUBTITLES = "folder of the {video_id}.jsonl word subtitles (with --subtitle-mode concatenated or interleaved)"
GROUP_TYPES = ("relevance", "logic")
GROUP_STRUCTURES = ([1, 2, 3, 4], [1, [2, 3], 4], [[1, 2], 3, 4])

FIELDS = {
    "row position": "id '{index}' (the script's index); metadata.benchmark.index, its group index // 4",
    "video_id": "video '{video_id}.mp4' under --video-root",
    "question": "question",
    "options": "options (A. ... H., one a line when written as one text)",
    "answer": "answer (the option letter)",
    "level, group_type, group_structure": "metadata.benchmark: the group rating (relevance / logic, its chain)",
    "second_head, third_head": "metadata.benchmark (the category breakdowns); second_head is metadata.task_kind",
    "--subtitles DIR: DIR/{video_id}.jsonl": "metadata.subtitle_prompt (--subtitle-mode concatenated) or "
    "metadata.subtitle_segments (interleaved)",
    "everything": "metadata.benchmark (the record as written)",
}


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """The rows of the parquet / JSON / JSONL file, each with ``__index__``, its position."""
    for position, (location, record) in enumerate(iter_records(path)):
        yield location, ({**record, "__index__": position} if isinstance(record, dict) else record)


def _options(record: dict) -> list[str]:
    value = record.get("options")
    if value is not None and not isinstance(value, (list, tuple, str)) and hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        value = [line.strip() for line in value.splitlines() if line.strip()]
    if not isinstance(value, (list, tuple)) or len(value) < 2 or not all(isinstance(v, str) and v.strip() for v in value):
        raise RowError("options", f"expected the options 'A. ...' to 'H. ...', got {str(value)[:60]!r}")
    return [str(v) for v in value]


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Video-MME-v2 question -> `VideoSample` (mapping: `FIELDS`)."""
    position = int(record.get("__index__", index))
    video = text(record, "video_id")
    options = _options(record)
    answer = letter(text(record, "answer"), options, "answer")
    group_type = text(record, "group_type")
    if group_type not in GROUP_TYPES:
        raise RowError("group_type", f"expected one of {list(GROUP_TYPES)}, got {group_type!r}")
    try:
        structure = ast.literal_eval(text(record, "group_structure"))
    except (ValueError, SyntaxError):
        structure = None
    if group_type == "logic" and structure not in GROUP_STRUCTURES:
        raise RowError("group_structure", f"expected one of {[str(s) for s in GROUP_STRUCTURES]}, got {record.get('group_structure')!r}")
    second_head = record.get("second_head")
    sample = benchmark_sample(
        NAME, record, location, root,
        sample_id=str(position),
        video=video if video.lower().endswith(".mp4") else f"{video}.mp4",
        question=text(record, "question"),
        options=options,
        answer=answer,
        task_kind=str(second_head) if second_head is not None else None,
        extra={"index": position},
    )  # fmt: skip
    if opts.subtitle_dir is not None:  # the concatenated subtitle mode; a video without a file gets ""
        words = Path(opts.subtitle_dir) / f"{video[:-4] if video.lower().endswith('.mp4') else video}.jsonl"
        try:
            entries = read_word_jsonl(words) if words.is_file() else None
        except DataError as exc:
            raise RowError("subtitles", str(exc)) from None
        if opts.subtitle_mode == "interleaved":
            sample.metadata["subtitle_segments"] = group_segments(entries or [])
        else:
            sample.metadata["subtitle_prompt"] = v2_concatenated_prompt(entries)
    return sample


# The official metric: scoring a run's trajectories as the benchmark's own script does.

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

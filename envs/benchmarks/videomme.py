"""Video-MME (Fu et al. 2024, "Video-MME: The First-Ever Comprehensive Evaluation Benchmark of
Multi-modal LLMs in Video Analysis") -> `VideoSample` rows.

Source: ``videomme/test-00000-of-00001.parquet`` of the Hugging Face dataset lmms-lab/Video-MME
(the annotation file the Video-MME repository, github.com/MME-Benchmarks/Video-MME, points to),
one row per question::

    {"video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Humanity & History",
     "url": "https://www.youtube.com/watch?v=fFjv93ACGo8", "videoID": "fFjv93ACGo8", "question_id": "001-1",
     "task_type": "Counting Problem", "question": "...", "options": ["A. Apples.", ...], "answer": "C"}

The repository's own nested JSON (``evaluation/output_test_template.json``: one object per video
with ``video_id``, ``duration``, ``domain``, ``sub_category`` and a ``questions`` list) is read too:
each question becomes a record with its video's fields.

Videos are ``{videoID}.mp4`` (the dataset's ``data/`` folder) under ``--video-root``; without a
``videoID`` (the nested JSON) ``{video_id}.mp4``. ``duration`` is Video-MME's length class
(short < 2 min, medium 4-15 min, long 30-60 min), not seconds: it is kept in
``metadata.benchmark.duration`` and `VideoSample.duration` stays unset. Video-MME has no clue
intervals. `videoseek.envs.benchmarks.videomme` scores the answers as ``eval_your_results.py``.

With ``convert --subtitles DIR`` (the with-subtitles setting) each sample also carries its video's
``DIR/{videoID}.srt`` as ``metadata.subtitles`` (``[]`` for a video without one), and the env shows
with each set of frames the subtitles at their times (`videoseek.envs.subtitles`).

Official metric. Video-MME's official metrics (``evaluation/eval_your_results.py`` of
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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text, text_list
from videoseek.envs.benchmarks._scoring import answer_text, markdown_table, pct, scored
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, iter_records
from videoseek.envs.subtitles import parse_srt
from videoseek.envs.trajectory import Trajectory

NAME = "videomme"
SUBTITLES = "folder of the {videoID}.srt subtitles (the with-subtitles setting: the cues at the frames' times)"
DURATIONS = ("short", "medium", "long")
VIDEO_FIELDS = ("video_id", "duration", "domain", "sub_category", "url", "videoID")

FIELDS = {
    "question_id": "id (Video-MME's own, e.g. '001-1')",
    "videoID | video_id": "video '{videoID}.mp4' under --video-root ('{video_id}.mp4' without videoID)",
    "question": "question",
    "options": "options ('A. ...' as written)",
    "answer": "answer (the option letter)",
    "task_type": "metadata.task_kind; the task-type breakdown of eval --benchmark videomme",
    "duration": "metadata.benchmark.duration (short / medium / long: the per-length tables; not seconds)",
    "domain, sub_category": "metadata.benchmark (the video-category breakdowns)",
    "questions[k] (nested JSON)": "one sample per question, with its video's fields",
    "everything": "metadata.benchmark (the record as written)",
    "--subtitles DIR: DIR/{videoID}.srt": "metadata.subtitles [[start, end, text], ...] (shown with the frames at their times)",
}


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """Rows of the parquet / JSON / JSONL file; a nested per-video record (with ``questions``)
    yields one record per question, carrying its video's fields."""
    for location, record in iter_records(path):
        if isinstance(record, dict) and "questions" in record:
            questions = record["questions"]
            if not isinstance(questions, list):
                yield location, RowError("questions", "expected a list of question objects")
                continue
            video = {k: record[k] for k in VIDEO_FIELDS if k in record}
            for k, q in enumerate(questions):
                yield f"{location} (questions.{k})", ({**video, **q} if isinstance(q, dict) else q)
        else:
            yield location, record


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Video-MME question -> `VideoSample` (mapping: `FIELDS`)."""
    qid = text(record, "question_id")
    video_key = "videoID" if record.get("videoID") else "video_id"
    video = text(record, video_key)
    duration = text(record, "duration")
    if duration not in DURATIONS:
        raise RowError("duration", f"expected one of {list(DURATIONS)}, got {duration!r}")
    for key in ("domain", "sub_category"):
        text(record, key)
    task_type = text(record, "task_type")
    options = text_list(record, "options")
    answer = letter(text(record, "answer"), options, "answer")
    sample = benchmark_sample(
        NAME, record, location, root,
        sample_id=qid,
        video=video if video.lower().endswith(".mp4") else f"{video}.mp4",
        question=text(record, "question"),
        options=options,
        answer=answer,
        task_kind=task_type,
    )  # fmt: skip
    if opts.subtitle_dir is not None:  # the with-subtitles setting; 156 of the 900 videos have none
        srt = Path(opts.subtitle_dir) / f"{Path(video).stem if video.lower().endswith('.mp4') else video}.srt"
        try:
            sample.metadata["subtitles"] = parse_srt(srt) if srt.is_file() else []
        except DataError as exc:
            raise RowError("subtitles", str(exc)) from None
    return sample


# The official metric: scoring a run's trajectories as the benchmark's own script does.

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

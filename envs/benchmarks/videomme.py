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
intervals. `videoseek.agents.benchmarks.videomme` scores the answers as ``eval_your_results.py``.

With ``convert --subtitles DIR`` (the with-subtitles setting) each sample also carries its video's
``DIR/{videoID}.srt`` as ``metadata.subtitles`` (``[]`` for a video without one), and the env shows
with each set of frames the subtitles at their times (`videoseek.envs.subtitles`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text, text_list
from videoseek.envs.convert import ConvertOptions, RowError, iter_records
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.subtitles import parse_srt

NAME = "videomme"
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

"""VideoMMMU (Hu et al. 2025) -> `VideoSample` rows.

Source: the parquet files of the Hugging Face dataset lmms-lab/VideoMMMU, one per track
(``Perception/``, ``Comprehension/``, ``Adaptation/``), read as the task files of
github.com/videommmu/VideoMMMU (``lmms_eval/tasks/videommmu/``, commit
103a3a5007e26fabbbe41b6377288910cbd660c0) read them: ``id`` (``{split}_{Subject}_{n}``, e.g.
``validation_Art_1``), ``question``, ``options`` (a list), ``answer`` (the letter, or the open
answer), ``question_type`` (``multiple-choice`` or an open type). The track is the one the file's
name or folder names (perception, comprehension or adaptation).

The video is ``{id}.mp4`` in its subject's discipline folder (``Art/``, ``Science/``,
``Humanities/``, ``Engineering/``, ``Medicine/``, ``Business/``: utils.py's ``get_cache_dir``) under
``--video-root``. The question is worded as the track's ``doc_to_text`` (``_default_template_yaml``):
Perception and Comprehension add "Please ignore the Quiz question in last frame of the video.";
Adaptation starts with its pre-prompt and the multiple-choice or open-ended prompt. Options are
lettered as ``parse_options`` letters them (``A. ...``). With ``convert --subtitles DIR`` the
question is the ``*_with_transcripts`` tasks' text: ``DIR/{id}.txt`` (the dataset's
``transcripts/``; "[Transcript not available]" without one) in their "Transcript for the Video:"
block. `videoseek.agents.benchmarks.videommmu`
scores the answers against ``metadata.benchmark`` (the record as written, plus ``track``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text
from videoseek.envs.convert import ConvertOptions, RowError, iter_records
from videoseek.envs.sample import DataError, ProblemType, VideoSample

NAME = "videommmu"
TRACKS = ("perception", "comprehension", "adaptation")
# _default_template_yaml, lmms_eval_specific_kwargs.default
PRE_PROMPT = "You should watch and learn the video content. Then apply what you learned to "
PERCEPTION_AND_COMPREHENSION_PROMPT = "\nPlease ignore the Quiz question in last frame of the video."
MCQ_PROMPT = "answer the following multi-choice question. The image for this question is at the end of the video.\n"
OPEN_ENDED_PROMPT = "answer the following open-ended question. The image for this question is at the end of the video.\n"
# videoperception_doc_to_text_with_transcript_*: the transcript block, and its stand-in for a missing file
TRANSCRIPT_TEMPLATE = "\nTranscript for the Video:\n{transcript}\n\nQuestion for the video:\n{question}"
NO_TRANSCRIPT = "[Transcript not available]"
DISCIPLINES = {
    "Art": ("Art", "Art_Theory", "Design", "Music"),
    "Science": ("Biology", "Chemistry", "Geography", "Math", "Physics"),
    "Humanities": ("History", "Literature", "Sociology", "Psychology"),
    "Engineering": ("Agriculture", "Architecture_and_Engineering", "Computer_Science", "Electronics", "Energy_and_Power",
                    "Materials", "Mechanical_Engineering"),
    "Medicine": ("Basic_Medical_Science", "Clinical_Medicine", "Diagnostics_and_Laboratory_Medicine", "Pharmacy", "Public_Health"),
    "Business": ("Accounting", "Economics", "Finance", "Manage", "Marketing"),
}  # fmt: skip

FIELDS = {
    "id": "id (VideoMMMU's own); video '{discipline}/{id}.mp4' under --video-root",
    "question (+ the track's prompt)": "question, worded as the track's doc_to_text",
    "options": "options, lettered as parse_options letters them ('A. ...')",
    "answer": "answer (the letter for multiple-choice, the open answer otherwise)",
    "question_type": "problem_type (multiple-choice -> multiple_choice, else free_form)",
    "path (Perception/, Comprehension/, Adaptation/)": "metadata.benchmark.track; metadata.task_kind the subject",
    "--subtitles DIR: DIR/{id}.txt": "the question in the with-transcripts tasks' 'Transcript for the Video:' block",
    "everything": "metadata.benchmark (the record as written)",
}


def track_of(path: Any) -> str:
    """The VideoMMMU track a file's name or folder names; DataError otherwise.

    >>> track_of("VideoMMMU/Perception/test-00000-of-00001.parquet")
    'perception'
    """
    path = Path(path)
    found = [t for t in TRACKS if t in path.name.lower() or t in path.parent.name.lower()]
    if len(found) != 1:
        raise DataError(f"{path}: cannot tell the VideoMMMU track; the path must name one of {', '.join(TRACKS)} "
                        "(the dataset's Perception/, Comprehension/, Adaptation/ folders)")  # fmt: skip
    return found[0]


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """The rows of one track's parquet / JSON / JSONL file, each with ``__track__``."""
    track = track_of(path)
    for location, record in iter_records(path):
        yield location, ({**record, "__track__": track} if isinstance(record, dict) else record)


def _transcript(path: Path) -> str:
    """The stripped text of ``{id}.txt``, or "[Transcript not available]" without one (utils.py)."""
    return path.read_text(encoding="utf-8").strip() if path.is_file() else NO_TRANSCRIPT


def subject_of(sample_id: str) -> str:
    """utils.py's ``extract_subset_name``: ``validation_Art_Theory_3`` -> ``Art_Theory``.

    >>> subject_of("validation_Art_Theory_3")
    'Art_Theory'
    """
    split = sample_id.split("_")[0]
    m = re.search(rf"^{re.escape(split)}_(.+?)_\d+$", sample_id)
    if not m:
        raise RowError("id", f"expected '{{split}}_{{Subject}}_{{n}}', got {sample_id!r}")
    return m.group(1)


def lettered_options(options: list[str]) -> list[str]:
    """utils.py's ``parse_options`` as a list: kept when already ``A.``, ``B.``, ...; else lettered."""
    letters = [chr(ord("A") + i) for i in range(len(options))]
    if all(o.startswith(f"{x}.") for o, x in zip(options, letters)):
        return list(options)
    return [f"{x}. {o}" for x, o in zip(letters, options)]


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One VideoMMMU question -> `VideoSample` (mapping: `FIELDS`)."""
    qid = text(record, "id")
    subject = subject_of(qid)
    discipline = next((d for d, subjects in DISCIPLINES.items() if subject in subjects), None)
    if discipline is None:
        raise RowError("id", f"subject {subject!r} is not one of VideoMMMU's 30")
    track = record.get("__track__", record.get("track"))
    if track not in TRACKS:
        raise RowError("track", f"expected one of {list(TRACKS)}, got {track!r}")
    question = text(record, "question")
    qtype = record.get("question_type", "None")
    raw_options = record.get("options")
    if raw_options is not None and not isinstance(raw_options, (list, tuple, str)) and hasattr(raw_options, "tolist"):
        raw_options = raw_options.tolist()
    if raw_options is None:
        raw_options = []
    if not isinstance(raw_options, (list, tuple)) or not all(isinstance(o, str) for o in raw_options):
        raise RowError("options", f"expected a list of option strings, got {str(raw_options)[:60]!r}")
    multiple_choice = qtype == "multiple-choice"
    if multiple_choice and len(raw_options) < 2:
        raise RowError("options", f"a multiple-choice question needs at least 2 options, got {len(raw_options)}")
    options = lettered_options(list(raw_options)) if multiple_choice else None
    if opts.subtitle_dir is not None:  # the *_with_transcripts tasks
        question = TRANSCRIPT_TEMPLATE.format(transcript=_transcript(Path(opts.subtitle_dir) / f"{qid}.txt"), question=question)
    if track == "adaptation":
        question = PRE_PROMPT + (MCQ_PROMPT if multiple_choice else OPEN_ENDED_PROMPT) + question
    else:
        question = question + PERCEPTION_AND_COMPREHENSION_PROMPT
    answer = text(record, "answer")
    return benchmark_sample(
        NAME, record, location, root,
        sample_id=qid,
        video=f"{discipline}/{qid}.mp4",
        question=question,
        options=options,
        answer=letter(answer, options, "answer") if options else answer,
        problem_type=ProblemType.multiple_choice if multiple_choice else ProblemType.free_form,
        task_kind=subject,
        extra={"track": track},
    )  # fmt: skip

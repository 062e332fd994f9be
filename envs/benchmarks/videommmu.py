"""VideoMMMU (Hu et al. 2025) -> `VideoSample` rows.

Source: the Hugging Face dataset lmms-lab/VideoMMMU as ``huggingface-cli download
lmms-lab/VideoMMMU --repo-type dataset --local-dir VideoMMMU`` lays it out: one folder per track
(``Perception/``, ``Comprehension/``, ``Adaptation/``) holding its parquet file
(``test-00000-of-00001.parquet``; the parquet-converter branch's ``test/0000.parquet`` is read
too), and the videos as one zip per discipline (``Art.zip``, ``Science.zip``, ...) that unpack to
``Art/``, ``Science/``, ... beside the track folders. ``videoseek convert --from videommmu
VideoMMMU/`` reads the three tracks from the folder (a track folder, or single track files, may be
given instead: the track is the one the file's name or folder names). The rows are read as the
task files of github.com/videommmu/VideoMMMU (``lmms_eval/tasks/videommmu/``, commit
103a3a5007e26fabbbe41b6377288910cbd660c0) read them: ``id`` (``{split}_{Subject}_{n}``, e.g.
``validation_Art_1``), ``question``, ``options`` (a list), ``answer`` (the letter, or the open
answer), ``question_type`` (``multiple-choice`` or an open type). Other folders of the download
(``Comprehension_Engineering/``, a subset some revisions carry, ``question_only_videos``) are not
tracks and are not read.

Sample ids. The three tracks ask about the same videos with the same ids, so a sample's id is
VideoMMMU's id and its track: ``validation_Art_1@perception`` (`sample_id`, `split_sample_id`).
The tracks can be converted together or one by one and joined: no id repeats.
``metadata.benchmark`` keeps the row as written (``id`` is VideoMMMU's own, the one lmms-eval
reports) plus ``track``; the scorer reads those two, so samples converted before the track was in
the id (plain ``validation_Art_1``) score the same.

The video is ``{id}.mp4`` (``.MP4`` when only that exists, as utils.py falls back) in its
subject's discipline folder (``Art/``, ``Science/``, ``Humanities/``, ``Engineering/``,
``Medicine/``, ``Business/``: utils.py's ``get_cache_dir``) under ``--video-root``, by default the
dataset folder (the one holding the track folders; a file outside a track folder: its own folder).
The question is worded as the track's ``doc_to_text`` (``_default_template_yaml``):
Perception and Comprehension add "Please ignore the Quiz question in last frame of the video.";
Adaptation starts with its pre-prompt and the multiple-choice or open-ended prompt. Options are
lettered as ``parse_options`` letters them (``A. ...``). With ``convert --subtitles DIR`` the
question is the ``*_with_transcripts`` tasks' text: ``DIR/{id}.txt`` (the dataset's
``transcripts/``; "[Transcript not available]" without one) in their "Transcript for the Video:"
block. `videoseek.envs.benchmarks.videommmu`
scores the answers against ``metadata.benchmark`` (the record as written, plus ``track``).

Official metric. VideoMMMU's official metrics (``lmms_eval/tasks/videommmu/utils.py`` of github.com/videommmu/VideoMMMU,
commit 103a3a5007e26fabbbe41b6377288910cbd660c0: ``videoperception_process_results`` and
``videoperception_aggregate_results``, with the MMMU helpers it carries from MMMU's
``eval/eval_utils.py``).

Each reply is parsed by the question's type: ``multiple-choice`` by ``parse_multi_choice_response``
(punctuation stripped from the ends; candidates ``A.`` / ``A:``, else ``(A)``, else ``A `` followed
by a space, else, in a reply of more than five words, an option's text; the last one in the reply
wins; none is "No Answere Found", wrong), the others by ``parse_open_response`` (key sub-responses
after "is", "so", "=", ..., their numbers, normalized). Correct is an exact letter match
(``multiple-choice``, ``perception``) or ``eval_open``'s containment. An empty reply parses as
"API Error" and is **left out** of every denominator, as the script filters those results.

Accuracy per subject (``extract_subset_name`` of the id), per discipline (``Overall-`` +
``DOMAIN_CAT2SUB_CAT``'s six, instance-weighted over its subjects) and ``Overall`` (all valid
replies), in percent; per track as well, since a run may mix the three (the script scores each
track as its own task: a track's ``Overall`` is its number).

Here a reply is the episode's final ``<answer>`` text ("" when it gave none: left out as above).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text
from videoseek.envs.benchmarks._scoring import answer_text, markdown_table, pct, scored
from videoseek.envs.sample import DataError, ProblemType, VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, iter_records
from videoseek.envs.trajectory import Trajectory

NAME = "videommmu"
TRACKS = ("perception", "comprehension", "adaptation")
TRACK_ID_SEPARATOR = "@"  # sample id = "{VideoMMMU id}@{track}"
SUBTITLES = "folder of the {id}.txt transcripts (the dataset's transcripts/): the *_with_transcripts tasks"
SOURCE_SUFFIXES = (".parquet", ".jsonl", ".json")  # a track folder's files that are read
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
    "id": "id '{id}@{track}' (VideoMMMU's own id and the track); video '{discipline}/{id}.mp4' under --video-root "
          "(default: the dataset folder)",
    "question (+ the track's prompt)": "question, worded as the track's doc_to_text",
    "options": "options, lettered as parse_options letters them ('A. ...')",
    "answer": "answer (the letter for multiple-choice, the open answer otherwise)",
    "question_type": "problem_type (multiple-choice -> multiple_choice, else free_form)",
    "path (Perception/, Comprehension/, Adaptation/)": "metadata.benchmark.track (a folder input: every track folder in it); "
    "metadata.task_kind the subject",
    "--subtitles DIR: DIR/{id}.txt": "the question in the with-transcripts tasks' 'Transcript for the Video:' block",
    "everything": "metadata.benchmark (the record as written)",
}


def sample_id(qid: str, track: str) -> str:
    """The id of VideoMMMU question `qid` in `track`: ids repeat across the three tracks.

    >>> sample_id("validation_Art_1", "perception")
    'validation_Art_1@perception'
    """
    return f"{qid}{TRACK_ID_SEPARATOR}{track}"


def split_sample_id(sid: str) -> tuple[str, str | None]:
    """(VideoMMMU id, track) of a sample id; (the id, None) for an id without a track (converted
    before the track was in the id; its ``metadata.benchmark.track`` says it).

    >>> split_sample_id("validation_Art_1@perception"), split_sample_id("validation_Art_1")
    (('validation_Art_1', 'perception'), ('validation_Art_1', None))
    """
    qid, sep, track = sid.rpartition(TRACK_ID_SEPARATOR)
    if sep and track in TRACKS:
        return qid, track
    return sid, None


def _track_named(name: str) -> str | None:
    """The track a folder name is, exactly ("Perception" -> "perception"); None otherwise."""
    name = name.lower()
    return name if name in TRACKS else None


def track_of(path: Any) -> str:
    """The VideoMMMU track a file's name or folder names; DataError otherwise.

    >>> track_of("VideoMMMU/Perception/test-00000-of-00001.parquet"), track_of("VideoMMMU/Adaptation/test/0000.parquet")
    ('perception', 'adaptation')
    """
    path = Path(path)
    for folder in (path.parent, path.parent.parent):  # Track/file or Track/test/file
        if _track_named(folder.name):
            return folder.name.lower()
    found = [t for t in TRACKS if t in path.name.lower() or t in path.parent.name.lower()]
    if len(found) != 1:
        raise DataError(f"{path}: cannot tell the VideoMMMU track; the path must name one of {', '.join(TRACKS)} "
                        "(the dataset's Perception/, Comprehension/, Adaptation/ folders), or give the dataset folder")  # fmt: skip
    return found[0]


def dataset_folder(path: Any) -> Path:
    """The folder a track file's videos are under by default: the one holding its track folder
    (``VideoMMMU/`` for ``VideoMMMU/Perception/test-00000-of-00001.parquet``), else the file's own."""
    path = Path(path)
    for folder in (path.parent, path.parent.parent):
        if _track_named(folder.name):
            return folder.parent
    return path.parent


def track_files(folder: Any) -> list[tuple[str, Path]]:
    """(track, file) of every track file under a downloaded dataset folder, in track order; the
    folder may be a track folder itself. DataError when it holds none."""
    folder = Path(folder)
    own = _track_named(folder.resolve().name)
    tracks = [(own, folder)] if own else [(t, d) for t in TRACKS for d in sorted(folder.iterdir()) if d.is_dir() and _track_named(d.name) == t]
    out = []
    for track, track_dir in tracks:
        files = sorted(p for p in track_dir.rglob("*") if p.is_file() and p.suffix.lower() in SOURCE_SUFFIXES
                       and not any(part.startswith(".") for part in p.relative_to(track_dir).parts))  # fmt: skip
        out.extend((track, f) for f in files)
    if not out:
        raise DataError(f"{folder}: no VideoMMMU track files: expected Perception/, Comprehension/ and Adaptation/ folders "
                        "with their parquet files, as `huggingface-cli download lmms-lab/VideoMMMU` lays them out")  # fmt: skip
    return out


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """The rows of a downloaded dataset folder (every track's files), of a track folder, or of one
    track's parquet / JSON / JSONL file; each with ``__track__`` and ``__dataset_dir__`` (the
    default video root)."""
    path = Path(path)
    if path.is_dir():
        root = path.resolve().parent if _track_named(path.resolve().name) else path.resolve()
        files = [(track, f, root) for track, f in track_files(path)]
    else:
        files = [(track_of(path.resolve()), path, dataset_folder(path.resolve()))]
    for track, file, root in files:
        for location, record in iter_records(file):
            yield location, ({**record, "__track__": track, "__dataset_dir__": str(root)} if isinstance(record, dict) else record)


def _transcript(path: Path) -> str:
    """The stripped text of ``{id}.txt``, or "[Transcript not available]" without one (utils.py)."""
    return path.read_text(encoding="utf-8").strip() if path.is_file() else NO_TRANSCRIPT


def _video(root: str, discipline: str, qid: str) -> str:
    """``{discipline}/{id}.mp4``, or ``.MP4`` when only that file exists (utils.py's fallback)."""
    video = f"{discipline}/{qid}.mp4"
    upper = f"{discipline}/{qid}.MP4"
    if not os.path.exists(os.path.join(root, video)) and os.path.exists(os.path.join(root, upper)):
        return upper
    return video


def subject_of(qid: str) -> str:
    """utils.py's ``extract_subset_name``: ``validation_Art_Theory_3`` -> ``Art_Theory``.

    >>> subject_of("validation_Art_Theory_3")
    'Art_Theory'
    """
    split = qid.split("_")[0]
    m = re.search(rf"^{re.escape(split)}_(.+?)_\d+$", qid)
    if not m:
        raise RowError("id", f"expected '{{split}}_{{Subject}}_{{n}}', got {qid!r}")
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
    video_root = opts.video_root or record.get("__dataset_dir__") or root
    return benchmark_sample(
        NAME, record, location, video_root,
        sample_id=sample_id(qid, track),
        video=_video(video_root, discipline, qid),
        question=question,
        options=options,
        answer=letter(answer, options, "answer") if options else answer,
        problem_type=ProblemType.multiple_choice if multiple_choice else ProblemType.free_form,
        task_kind=subject,
        extra={"track": track},
    )  # fmt: skip


# The official metric: scoring a run's trajectories as the benchmark's own script does.

API_ERROR = "API Error"
NO_ANSWER = "No Answere Found"  # sic, the script's value
DOMAIN_CAT2SUB_CAT = {
    "Art and Design": ("Art", "Art_Theory", "Design", "Music"),
    "Business": ("Accounting", "Economics", "Finance", "Manage", "Marketing"),
    "Science": ("Biology", "Chemistry", "Geography", "Math", "Physics"),
    "Health and Medicine": ("Basic_Medical_Science", "Clinical_Medicine", "Diagnostics_and_Laboratory_Medicine", "Pharmacy", "Public_Health"),
    "Humanities and Social Science": ("History", "Literature", "Sociology", "Psychology"),
    "Tech and Engineering": ("Agriculture", "Architecture_and_Engineering", "Computer_Science", "Electronics", "Energy_and_Power",
                             "Materials", "Mechanical_Engineering"),
}  # fmt: skip
_KEY_INDICATORS = (
    "could be ", "so ", "is ", "thus ", "therefore ", "final ", "answer ", "result ", "are ", "in total ", "total ",
    "identify ", "recognize ", "calculated as ", "counted as ", "measured as ", "observed as ", "concluded as ",
    "found to be ", "equals ", "determined to be ", "number of ", "value is ", "adds up to ", "have ", "has ",
)  # fmt: skip


def parse_multi_choice_response(response: str, all_choices: Sequence[str], index2ans: dict[str, str]) -> str:
    """The script's ``parse_multi_choice_response``: the chosen letter, "API Error" for "", or
    "No Answere Found".

    >>> parse_multi_choice_response("The answer is (B).", ["A", "B"], {"A": "red", "B": "blue"})
    'B'
    """
    if response == API_ERROR or response == "":
        return API_ERROR
    for char in (",", ".", "!", "?", ";", ":", "'"):
        response = response.strip(char)
    response = " " + response + " "
    index_ans, with_brack, with_period, with_colon = True, False, False, False
    candidates: list[str] = []
    for choice in all_choices:
        if f"{choice}." in response:
            candidates.append(choice)
            with_period = True
    for choice in all_choices:
        if f"{choice}:" in response:
            candidates.append(choice)
            with_colon = True
    if not candidates:
        for choice in all_choices:
            if f"({choice})" in response:
                candidates.append(choice)
                with_brack = True
    if not candidates:
        for choice in all_choices:
            if f"{choice} " in response:
                candidates.append(choice)
    if not candidates and len(response.split()) > 5:
        for index, ans in index2ans.items():
            if ans.lower() in response.lower():
                candidates.append(index)
                index_ans = False
    if not candidates:
        return NO_ANSWER
    if len(candidates) == 1:
        return candidates[0]
    if not index_ans:
        starts = [response.lower().rfind(index2ans[c].lower()) for c in candidates]
    elif with_period:
        starts = [response.rfind(f"{c}.") for c in candidates]
    elif with_colon:
        starts = [response.rfind(f"{c}:") for c in candidates]
    elif with_brack:
        starts = [response.rfind(f"({c})") for c in candidates]
    else:
        starts = [response.rfind(f" {c} ") for c in candidates]
    return candidates[starts.index(max(starts))]  # np.argmax: the first of the largest


def extract_numbers(string: str) -> list[str]:
    """MMMU's ``extract_numbers``: numbers with commas, in scientific notation, then simple ones."""
    commas = re.findall(r"-?\b\d{1,3}(?:,\d{3})+\b", string)
    scientific = re.findall(r"-?\d+(?:\.\d+)?[eE][+-]?\d+", string)
    simple = re.findall(r"-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d])", string)
    return commas + scientific + simple


def _is_number(string: str) -> bool:
    try:
        float(string.replace(",", ""))
        return True
    except ValueError:
        return False


def normalize_str(string: str) -> list[Any]:
    """MMMU's ``normalize_str``: a number rounded to 2 decimals, else the lower-cased text (a single
    character padded with a space on either side)."""
    string = string.strip()
    if _is_number(string):
        return [round(float(string.replace(",", "")), 2)]
    string = string.lower()
    return [" " + string, string + " "] if len(string) == 1 else [string]


def parse_open_response(response: str) -> list[Any] | str:
    """The script's ``parse_open_response``: the normalized candidate answers ("API Error" for "").

    >>> parse_open_response("So the total is 42.")
    [42.0]
    """
    if response == API_ERROR or response == "":
        return API_ERROR
    text = response.strip().strip(".").lower()
    subs = re.split(r"\.\s(?=[A-Z])|\n", text)
    keys: list[str] = []
    indicators = list(_KEY_INDICATORS)
    for i, resp in enumerate(subs):
        if i == len(subs) - 1:
            indicators.append("=")
        shortest = None
        for indicator in indicators:
            if indicator in resp:
                tail = resp.split(indicator)[-1].strip()
                if not shortest or len(tail) < len(shortest):
                    shortest = tail
        if shortest and shortest.strip() not in (":", ",", ".", "!", "?", ";", "'"):
            keys.append(shortest)
    if not keys:
        keys = [text]
    preds: list[Any] = list(keys)
    for resp in keys:
        preds.extend(extract_numbers(resp))
    out: list[Any] = []
    for p in preds:
        out.extend(normalize_str(p))
    return list(set(out))


def eval_open(gold: Any, preds: Any) -> bool:
    """MMMU's ``eval_open``: a normalized gold string inside a predicted string, or a gold number
    equal to a predicted one."""
    norm: list[Any] = []
    for answer in gold if isinstance(gold, list) else [gold]:
        norm.extend(normalize_str(answer))
    for pred in preds:
        if isinstance(pred, str):
            if any(isinstance(a, str) and a in pred for a in norm):
                return True
        elif pred in norm:
            return True
    return False


def question_correct(reply: str, record: dict[str, Any]) -> tuple[bool, bool]:
    """(valid, correct) of one reply: valid is False for an "API Error" (an empty reply)."""
    qtype = record.get("question_type", "None")
    if qtype == "multiple-choice":
        options = list(record.get("options") or [])
        choices = [chr(ord("A") + i) for i in range(len(options))]
        parsed: Any = parse_multi_choice_response(reply, choices, dict(zip(choices, options)))
    else:
        parsed = parse_open_response(reply)
    if parsed == API_ERROR:
        return False, False
    gold = record["answer"]
    if qtype in ("multiple-choice", "perception"):
        correct = gold == parsed if not isinstance(gold, list) else parsed in gold
    else:
        correct = eval_open(gold, parsed)
    return True, bool(correct)


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """Per track: ``Overall``, the six disciplines and the subjects, as the script prints them
    (module docstring); ``num`` the valid replies, ``api_errors`` those left out."""
    per_track: dict[str, dict[str, list[int]]] = defaultdict(dict)
    errors: dict[str, int] = defaultdict(int)
    for traj, sample, rec in scored(trajectories, samples, NAME):
        track = rec["track"]
        valid, correct = question_correct(answer_text(traj), rec)
        if not valid:
            errors[track] += 1
            continue
        c = per_track[track].setdefault(subject_of(rec["id"]), [0, 0])
        c[0] += int(correct)
        c[1] += 1
    tracks: dict[str, Any] = {}
    for track in [t for t in TRACKS if t in per_track or t in errors]:
        subjects = per_track.get(track, {})
        table: dict[str, dict[str, Any]] = {}
        for domain, subs in DOMAIN_CAT2SUB_CAT.items():
            present = [s for s in subs if s in subjects]
            right, num = sum(subjects[s][0] for s in present), sum(subjects[s][1] for s in present)
            table["Overall-" + domain] = {"num": num, "acc": pct(right, num)}
            for s in present:
                table[s] = {"num": subjects[s][1], "acc": pct(*subjects[s])}
        right, num = sum(c[0] for c in subjects.values()), sum(c[1] for c in subjects.values())
        table["Overall"] = {"num": num, "acc": pct(right, num)}
        tracks[track] = {"results": table, "api_errors": errors.get(track, 0)}
    return {"benchmark": NAME, "scale": "percent", "tracks": tracks,
            "script": "videommmu/VideoMMMU lmms_eval/tasks/videommmu/utils.py @ 103a3a5"}  # fmt: skip


def format_table(metrics: dict[str, Any]) -> str:
    """VideoMMMU's table: one row per track, its Overall and the six disciplines."""
    domains = list(DOMAIN_CAT2SUB_CAT)
    headers = ["Track", "Overall", *domains]
    rows = [[t.capitalize(), r["results"]["Overall"]["acc"], *(r["results"]["Overall-" + d]["acc"] for d in domains)]
            for t, r in metrics["tracks"].items()]  # fmt: skip
    return markdown_table(headers, rows)

"""Subtitles shown with the frames they belong to (Video-MME's with-subtitles setting).

Video-MME's protocol (github.com/MME-Benchmarks/Video-MME README, "Extract Frames and Subtitles",
commit 06c2315): "you should only use the subtitles corresponding to the sampled video frames ...
if you extract 10 frames per video, take the 10 subtitles that correspond to the time of those 10
frames", listed before the question after "This video's subtitles are listed below:". A sample
carries its video's subtitles as ``metadata["subtitles"]`` (``[[start, end, text], ...]``, seconds,
from the video's SRT file: `parse_srt`); the env shows, with each set of frames it returns (the
first ones and each crop), the subtitle line of each frame's time (`subtitles_at`).

Video-MME-v2's concatenated subtitle mode (``evaluation/test_video_mme_v2.py``, commit b24176a)
gives all of a video's words at once: its samples carry ``metadata["subtitle_prompt"]``
(`v2_concatenated_prompt`), which the env puts before its first observation's text. Its
interleaved mode groups the words into sentence segments (`group_segments`, the script's
``group_subtitle_segments``), kept as ``metadata["subtitle_segments"]``; with each set of frames the
env lists, frame by frame, the segments overlapping the interval from that frame to the next (the
last: to the end of the video, or of the crop), written ``[Subtitle 1.00s - 2.50s]: text`` as the
script writes them (`interleaved_lines`). The script places them between the frame images; here
they follow the images in the observation's text, in frame order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from videoseek.envs.sample import DataError

# Video-MME-v2 evaluation/test_video_mme_v2.py WITH_SUB_PROMPT (its concatenated subtitle mode)
V2_WITH_SUB_PROMPT = "These are the frames of a video. This video's subtitles are listed below:\n{}\n"
# ... and WITH_SUB_PROMPT_INTERLEAVE (its interleaved mode)
V2_WITH_SUB_PROMPT_INTERLEAVE = (
    "These are the frames of a video with corresponding subtitles shown between frames. "
    "The subtitles indicate what is being said during the time interval between adjacent frames."
)

HEADER = "This video's subtitles are listed below:"  # Video-MME's prompt
_TIME = re.compile(r"^\s*(\d+):(\d{2}):(\d{2})[,.](\d{1,3})\s*-->\s*(\d+):(\d{2}):(\d{2})[,.](\d{1,3})")


def _seconds(h: str, m: str, s: str, ms: str) -> float:
    return int(h) * 3600 + int(m) * 60 + int(s) + int(ms.ljust(3, "0")) / 1000


def parse_srt(path: str | Path) -> list[list]:
    """``[[start, end, text], ...]`` of an SRT file (cue lines joined by a space); a cue whose time
    line is malformed is a one-line `DataError` naming the file and line.

    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".srt", delete=False)
    >>> _ = f.write("1\\n00:00:01,000 --> 00:00:02,500\\nHi guys,\\nwelcome\\n\\n2\\n00:00:03,000 --> 00:00:04,000\\nBye\\n"); f.close()
    >>> parse_srt(f.name)
    [[1.0, 2.5, 'Hi guys, welcome'], [3.0, 4.0, 'Bye']]
    >>> os.unlink(f.name)
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    cues: list[list] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        if lines[i].strip().isdigit() and i + 1 < len(lines):
            i += 1  # the cue number
        m = _TIME.match(lines[i])
        if not m:
            raise DataError(f"{path}:{i + 1}: expected an SRT time line 'HH:MM:SS,mmm --> HH:MM:SS,mmm', got {lines[i].strip()[:60]!r}")
        start, end = _seconds(*m.groups()[:4]), _seconds(*m.groups()[4:])
        i += 1
        text = []
        while i < len(lines) and lines[i].strip():
            text.append(lines[i].strip())
            i += 1
        cues.append([start, end, " ".join(text)])
    return cues


def subtitles_at(subtitles: Sequence[Sequence], times: Sequence[float]) -> list[str]:
    """One line per frame time that falls inside a cue: the first cue with ``start < t < end``, as
    the frame-and-subtitle extractor Video-MME's README points to does (look4u-ok/video-slicer
    ``slice_and_extract.py``, commit aff7000: a frame outside every cue adds nothing; two frames in
    one cue add its line twice).

    >>> subtitles_at([[1.0, 2.5, "Hi"], [3.0, 4.0, "Bye"], [5, 6, "Later"]], [1.2, 2.0, 3.5, 4.5])
    ['Hi', 'Hi', 'Bye']
    """
    out = []
    for t in times:
        line = next((str(text) for start, end, text in subtitles if float(start) < t < float(end)), None)
        if line is not None and line.strip():
            out.append(line)
    return out


def subtitle_block(subtitles: Sequence[Sequence], times: Sequence[float], header: str = HEADER) -> str:
    """`header` and the lines of `subtitles_at` (one a line); "" when no frame has a subtitle."""
    lines = subtitles_at(subtitles, times)
    return "\n".join([header, *lines]) if lines else ""


def read_word_jsonl(path: str | Path) -> list[dict]:
    """Video-MME-v2's word-level subtitle file (``{video_id}.jsonl``, one ``{"text", "start_time",
    "end_time"}`` a line; the script's ``load_subtitle_jsonl``); a bad line is a one-line `DataError`
    naming file and line."""
    path = Path(path)
    entries = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
            raise DataError(f"{path}:{lineno}: field 'text': expected a word entry {{text, start_time, end_time}}")
        entries.append(entry)
    return entries


def v2_concatenated_prompt(entries: list[dict] | None) -> str:
    """The text test_video_mme_v2.py puts after the frames in its concatenated mode:
    ``WITH_SUB_PROMPT`` around every word joined by a space (``subtitle_concat_all``; "" when the
    video has no subtitle file).

    >>> v2_concatenated_prompt([{"text": "Hi", "start_time": 0, "end_time": 1}, {"text": "there", "start_time": 1, "end_time": 2}])
    "These are the frames of a video. This video's subtitles are listed below:\\nHi there\\n"
    """
    return V2_WITH_SUB_PROMPT.format(" ".join(e["text"] for e in entries) if entries else "")


def group_segments(entries: list[dict], gap_threshold: float = 0.5) -> list[list]:
    """test_video_mme_v2.py's ``group_subtitle_segments`` as ``[[start, end, text], ...]``: a new
    segment when the gap to the previous word exceeds `gap_threshold` s, or exceeds 0.1 s after a
    word ending in . ! ?

    >>> group_segments([{"text": "Hi.", "start_time": 0, "end_time": 0.3}, {"text": "Yes", "start_time": 0.5, "end_time": 0.7},
    ...                 {"text": "sir", "start_time": 0.75, "end_time": 1.0}])
    [[0, 0.3, 'Hi.'], [0.5, 1.0, 'Yes sir']]
    """
    if not entries:
        return []
    segments, current = [], [entries[0]]
    for prev, curr in zip(entries, entries[1:]):
        gap = curr["start_time"] - prev["end_time"]
        if gap > gap_threshold or (prev["text"].rstrip().endswith((".", "!", "?")) and gap > 0.1):
            segments.append([current[0]["start_time"], current[-1]["end_time"], " ".join(w["text"] for w in current)])
            current = [curr]
        else:
            current.append(curr)
    segments.append([current[0]["start_time"], current[-1]["end_time"], " ".join(w["text"] for w in current)])
    return segments


def interleaved_lines(segments: Sequence[Sequence], times: Sequence[float], end: float) -> list[str]:
    """Per frame (in `times` order) the segments overlapping ``[t_i, t_{i+1})`` (the last frame's
    interval ends at `end`), as test_video_mme_v2.py's ``segments_between_timestamps`` picks them
    (``seg_end >= t_i and seg_start < t_{i+1}``) and writes them.

    >>> interleaved_lines([[0.5, 1.0, "Yes sir"], [4.0, 5.0, "Later"]], [0.0, 2.0], 6.0)
    ['[Subtitle 0.50s - 1.00s]: Yes sir', '[Subtitle 4.00s - 5.00s]: Later']
    """
    out = []
    for i, t in enumerate(times):
        stop = times[i + 1] if i + 1 < len(times) else end
        out += [f"[Subtitle {float(s):.2f}s - {float(e):.2f}s]: {text}" for s, e, text in segments if float(e) >= t and float(s) < stop]
    return out

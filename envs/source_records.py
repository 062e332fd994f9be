"""Source dataset records: reading them, and the row helpers every converter shares.

The layer under `videoseek convert`: the training-format converters (`videoseek.envs.convert`) and
the public benchmarks' readers (`videoseek.envs.benchmarks.*`) both build their `VideoSample`s
with these, and `convert_files` (`envs/convert.py`) reports their errors alike. Dependencies
point one way: `convert` imports `benchmarks`, both import this module, and this module imports
neither.

- `iter_records(path)`: (location, record) of every record of a JSON, JSONL or parquet file;
  location ``FILE:LINE`` or ``FILE:row N``, for one-line errors.
- `RowError(field, message)`: a record that cannot be converted; `SkipRow(reason)`: one this
  library cannot use (counted, not an error). `ConvertOptions`: the knobs every converter takes.
- Field helpers: `options_from_question`, `option_letters`, `mc_letter` (multiple-choice options
  and answers), `span_field` (a [start, end] time span of a data field), `resolve_video`,
  `jsonable`, and `build_sample` (the converted row validated as a `VideoSample`, a failure a
  `RowError` naming the field).
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from videoseek.envs.errors import DataError
from videoseek.envs.sample import VideoSample
from videoseek.rewards.timestamps import parse_time

_OPTION_LINE = re.compile(r"^\s*\(?([A-Z])[\.\):]\s+(\S.*)$")
_OPTION_LETTER = re.compile(r"^\s*\(?([A-Z])[\.\):]")
# An option marker inside a line: "A. ", "(B) ", "C) ", "D: " at the start or after a space.
_INLINE_OPTION = re.compile(r"(?:^|(?<=\s))\(?([A-Z])[\.\):]\s+")
_SPAN_SPLIT = re.compile(r"\s*(?:-|–|to|,)\s*")


class RowError(ValueError):
    """A record that cannot be converted; `field` names the source field at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(f"field {field!r}: {message}")
        self.field = field


class SkipRow(Exception):
    """A well-formed record this library cannot use (e.g. image-only); counted, not an error."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ConvertOptions:
    """Knobs shared by the converters.

    `video_root`: folder that relative video paths are joined to (default: the input file's folder).
    `keyframe_window`: seconds of clue interval centred on each Open-o3 key frame when a record has
    no explicit clue span. Open-o3 annotates evidence as key *moments*; a crop of this width around
    each moment retrieves it, so the union of these windows is the record's clue set.
    `subtitle_dir`: videomme: the folder of Video-MME's ``{videoID}.srt`` files; video-mme-v2: of its
    ``{video_id}.jsonl`` word files (the with-subtitles settings, `videoseek.envs.subtitles`);
    videommmu: of its ``{id}.txt`` transcripts; None for the settings without them.
    """

    video_root: str | None = None
    keyframe_window: float = 1.0
    subtitle_dir: str | None = None
    subtitle_mode: str = "concatenated"  # video-mme-v2: "concatenated" | "interleaved"


# ---- reading records ---------------------------------------------------------------------------
def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[str, Any]]:
    """Yield (location, record) for every record of a JSON, JSONL or parquet file.

    The location is ``FILE:LINE`` (JSON arrays too: the line where the element starts) or
    ``FILE:row N`` for parquet. A line of a JSONL file that is not JSON yields a `RowError` as the
    record, so the caller reports it with the others instead of stopping.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: input file not found")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        yield from _iter_parquet(path)
        return
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if suffix == ".json" or (suffix != ".jsonl" and stripped.startswith("[")):
        if stripped.startswith("["):
            yield from _iter_json_array(path, text)
            return
        try:
            yield f"{path}:1", json.loads(text)
        except json.JSONDecodeError:
            pass  # not one JSON document: try JSON Lines below
        else:
            return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{lineno}", json.loads(line)
        except json.JSONDecodeError as exc:
            yield f"{path}:{lineno}", RowError("row", f"invalid JSON ({exc.msg} at column {exc.colno})")


def _iter_json_array(path: Path, text: str) -> Iterator[tuple[str, Any]]:
    """Elements of a top-level JSON array with the line each starts on.

    Written with `json.JSONDecoder.raw_decode` element by element (instead of `json.load`) so that
    every record carries its line number for error messages.
    """
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    line = 1 + text.count("\n", 0, pos)
    n = len(text)
    while True:
        start = pos
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        line += text.count("\n", start, pos)
        if pos >= n:
            yield f"{path}:{line}", RowError("row", "the JSON array is not closed (the file ends early)")
            return
        if text[pos] == "]":
            return
        try:
            record, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            # One broken element must not cost the others: report it and resume after it.
            yield f"{path}:{line}", RowError("row", f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
            nxt = _next_array_element(text, pos)
            if nxt is None:
                return  # no element can be found after it: the rows before it are kept
            line += text.count("\n", pos, nxt)
            pos = nxt
            continue
        yield f"{path}:{line}", record
        line += text.count("\n", pos, end)
        pos = end


def _next_array_element(text: str, pos: int) -> int | None:
    """Where the array element after the broken one starting at `pos` begins, or None.

    Dumped arrays put each element on its own line at one indentation (nested objects sit deeper),
    so the next element is the next line holding only that indentation before its "{", after a
    ",". Bracket counting cannot do this: one unbalanced quote in the broken element flips every
    string after it. An element that does not start its line (a one-line array) cannot be
    resynchronised safely: None, and the rest of the file is reported as one bad row."""
    line_start = text.rfind("\n", 0, pos) + 1
    indent = text[line_start:pos]
    if indent.strip():
        return None
    needle = "\n" + indent + "{"
    i = text.find(needle, pos)
    while i != -1:
        j = i
        while j > pos and text[j - 1] in " \t\r\n":
            j -= 1
        if text[j - 1] == ",":
            return i + len(needle) - 1
        i = text.find(needle, i + 1)
    return None


def _iter_parquet(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow ships with the train extra
        raise DataError(f"{path}: reading parquet needs pyarrow (pip install 'videoseek[train]')") from None
    row = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        for record in batch.to_pylist():
            row += 1
            yield f"{path}:row {row}", record


# ---- field helpers -----------------------------------------------------------------------------
def options_from_question(question: str) -> tuple[str, list[str]]:
    """Split trailing option lines ("A. red", "(B) blue") off a question; ([] when there are none).

    Open-o3's multiple-choice questions carry their options in the question text.
    """
    lines = question.rstrip().splitlines()
    options: list[str] = []
    while lines and _OPTION_LINE.match(lines[-1]):
        options.insert(0, lines.pop().strip())
    if lines and lines[-1].strip().lower().rstrip(":") in ("options", "choices"):
        lines.pop()
    letters = [_OPTION_LETTER.match(o).group(1) for o in options]
    if len(options) < 2 or letters != [chr(ord("A") + k) for k in range(len(letters))]:
        return _inline_options(question)
    return "\n".join(lines).strip(), options


def _inline_options(question: str) -> tuple[str, list[str]]:
    """Options written on the question's last line: "Which pattern? A. blocks B. stripes C. dots"
    (Open-o3's MCQ records do this). The markers must run A, B, C, ... from the first "A";
    at least two, else the question is returned unchanged with no options."""
    lines = question.rstrip().splitlines()
    if not lines:
        return question, []
    last = lines[-1]
    marks = list(_INLINE_OPTION.finditer(last))
    for first, mark in enumerate(marks):
        if mark.group(1) != "A":
            continue
        chain = [mark]
        for later in marks[first + 1 :]:
            if later.group(1) == chr(ord(chain[-1].group(1)) + 1):
                chain.append(later)
        if len(chain) < 2:
            continue
        bounds = [m.start() for m in chain] + [len(last)]
        options = [last[a:b].strip().rstrip(",;").strip() for a, b in zip(bounds, bounds[1:])]
        if any(not _OPTION_LINE.match(o) for o in options):  # a marker with no text after it
            continue
        head = last[: chain[0].start()].rstrip()
        if head.lower().endswith(("options:", "choices:")):
            head = head[: head.rfind(" ") + 1 if " " in head else 0].rstrip()
        return "\n".join([*lines[:-1], head]).strip(), options
    return question, []


def option_letters(options: list[str]) -> list[str] | None:
    """Letters of options written "A. text"; None when the options are not lettered that way."""
    letters = []
    for opt in options:
        m = _OPTION_LETTER.match(opt)
        if not m:
            return None
        letters.append(m.group(1))
    return letters


def span_field(value: Any, field_name: str) -> tuple[float, float]:
    """The time span a data field holds: [s, e], "[s, e]", "s - e", "s to e" or
    "HH:MM:SS.s - HH:MM:SS.s", in seconds, with 0 <= s < e; `RowError(field_name)` otherwise.

    Not `videoseek.rewards.timestamps.parse_span`, which finds the first span anywhere in a
    model's free text and returns None when there is none: this one reads a whole field of a
    dataset (a list or a string that is only the span), is strict, and names the field at fault.
    Both read each time with the one `parse_time`.

    >>> span_field("00:00:02.5 - 00:00:07", "time_reference"), span_field([1, 4], "clue")
    ((2.5, 7.0), (1.0, 4.0))
    """
    parts: Any = value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parts = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise RowError(field_name, f"unparseable time span {value!r}") from None
        else:
            parts = [p for p in _SPAN_SPLIT.split(text) if p]
    if not isinstance(parts, (list, tuple)) or len(parts) != 2:
        raise RowError(field_name, f"expected a [start, end] time span, got {value!r}")
    s, e = parse_time(parts[0]), parse_time(parts[1])
    if s is None or e is None:
        raise RowError(field_name, f"unparseable time span {value!r}")
    if not (0 <= s < e):
        raise RowError(field_name, f"time span needs 0 <= start < end, got {[s, e]}")
    return s, e


def resolve_video(path_text: str, root: str) -> str:
    """Join a record's relative video path ("./NeXT-QA/x.mp4") to `root`; absolute paths stay."""
    if os.path.isabs(path_text):
        return path_text
    rel = path_text[2:] if path_text.startswith("./") else path_text
    return os.path.normpath(os.path.join(root, rel))


def jsonable(value: Any) -> Any:
    """`value` if JSON can hold it, else its text (parquet can yield dates or bytes)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def build_sample(row: dict[str, Any]) -> VideoSample:
    """Validate the converted row as a `VideoSample`; a failure names the VideoSample field."""
    try:
        return VideoSample.model_validate(row)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "row"
        raise RowError(loc, first["msg"]) from None


def mc_letter(answer: str, options: list[str], field_name: str = "answer") -> str:
    """The option letter a multiple-choice answer names: "B", "(B)", "B.", "B. blue" or "blue"."""
    text = answer.strip()
    letters = option_letters(options)
    if letters is None:  # options not lettered "A. ...": keep the answer as written
        return text
    bare = text.rstrip(".").strip("()[] ")
    if bare in letters:
        return bare
    m = _OPTION_LETTER.match(text)
    if m and m.group(1) in letters:
        return m.group(1)
    for letter, opt in zip(letters, options):
        if _OPTION_LETTER.sub("", opt, count=1).strip().lower() == text.lower():
            return letter
    raise RowError(field_name, f"{answer!r} is not one of the option letters {letters}")

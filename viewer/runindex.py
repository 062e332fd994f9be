"""Byte-offset index of a run's `trajectories.jsonl`, with server-side filtering, sorting and paging.

Each line is parsed once to keep a small `EpisodeRow` (the fields the episode list filters and
sorts on) and the line's byte offset and length; a full episode is read again from disk only when
it is opened. So 10,000 episodes cost a few megabytes of rows, and opening one is a seek plus a
`json.loads` of one line.

The index grows with the file: `refresh()` reads only the bytes appended since the last call, so
a run that is still being written can be watched. A last line without its newline that does not
parse is shown as a "truncated last line" row until the writer finishes it. Any line that cannot
be used becomes a row with `problem` set; nothing here raises on bad content.
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field, fields
from operator import attrgetter
from pathlib import Path
from typing import Any

from videoseek.envs.metrics import EpisodeFacts, facts_of_json

# The trajectory versions this viewer reads: 1 (a crop_video action with start/end, a call record
# shaped for a span) and 2 (tool calls by name with their arguments, envs/trajectory.py).
SCHEMA_VERSIONS = (1, 2)
SCHEMA_VERSION = SCHEMA_VERSIONS[-1]  # the version the viewer writes (verldump.py)
TRAJECTORIES = "trajectories.jsonl"
QUESTION_CHARS = 300  # enough for a list cell and for text search on the question

OUTCOMES = ("all", "correct", "wrong", "unanswered", "problem")
SORT_KEYS = ("index", "episode_id", "sample_id", "reward", "accuracy", "advantage", "turns", "calls", "score", "coverage")


@dataclass
class EpisodeRow:
    """What the episode list shows and filters on; `problem` is set when the line is unusable."""

    index: int
    line: int
    offset: int
    length: int
    episode_id: str = ""
    sample_id: str = ""
    policy: str = ""
    problem_type: str = ""
    task_kind: str = ""
    group_id: str = ""
    group_index: int | None = None
    role: str = ""
    question: str = ""
    prediction: str | None = None
    answer: str = ""
    correct: bool | None = None
    accuracy: float | None = None
    reward: float | None = None
    advantage: float | None = None
    turns: int = 0
    calls: int = 0
    score: float | None = None
    coverage: float | None = None
    failure: str | None = None
    schema_version: Any = None
    problem: str | None = None
    search_text: str = field(default="", repr=False)
    reward_components: dict[str, float] = field(default_factory=dict, repr=False)  # for run aggregates; not sent with list rows
    facts: EpisodeFacts = field(default_factory=EpisodeFacts, repr=False)  # the tool-use metrics' input (envs.metrics); for run aggregates

    def public(self) -> dict[str, Any]:
        """The row as JSON for the page (without the internal search text)."""
        # a plain field read, not dataclasses.asdict: that deep-copies every value and was the
        # slowest step of answering for a large group
        return {name: getattr(self, name) for name in PUBLIC_FIELDS}


PUBLIC_FIELDS = tuple(f.name for f in fields(EpisodeRow) if f.name not in ("search_text", "reward_components", "facts"))


@dataclass
class EpisodeQuery:
    """Filters and ordering of the episode list; empty strings and None mean "any"."""

    outcome: str = "all"
    policy: str = ""
    problem_type: str = ""
    task_kind: str = ""
    role: str = ""
    reward_min: float | None = None
    reward_max: float | None = None
    text: str = ""
    sort: str = "index"
    descending: bool = False
    page: int = 0
    per_page: int = 50


# ---- small total functions over untrusted JSON --------------------------------------------------
def as_float(value: Any) -> float | None:
    """`value` as a finite float, or None (bools, strings, NaN and infinities are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def as_str(value: Any) -> str:
    """`value` as text: strings as they are, None as "", anything else through `str`."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def summarize(raw: Any, index: int, line: int, offset: int, length: int) -> EpisodeRow:
    """An `EpisodeRow` from one parsed line; never raises, marks what is wrong in `problem`."""
    row = EpisodeRow(index=index, line=line, offset=offset, length=length)
    if not isinstance(raw, dict):
        row.problem = f"line {line}: expected a JSON object, got {type(raw).__name__}"
        row.search_text = row.problem.lower()
        return row
    group = as_dict(raw.get("group"))
    turns = as_list(raw.get("turns"))
    last_evidence: dict[str, Any] = {}
    for turn in turns:
        turn = as_dict(turn)
        if isinstance(turn.get("evidence"), dict):
            last_evidence = turn["evidence"]
    correct = raw.get("correct")
    prediction = raw.get("prediction")
    row.episode_id = as_str(raw.get("episode_id")) or f"line-{line}"
    row.sample_id = as_str(raw.get("sample_id"))
    row.policy = as_str(raw.get("policy"))
    row.problem_type = as_str(raw.get("problem_type"))
    row.task_kind = as_str(raw.get("task_kind"))
    row.group_id = as_str(group.get("id"))
    row.role = as_str(group.get("role"))
    gi = group.get("index")
    row.group_index = gi if isinstance(gi, int) and not isinstance(gi, bool) else None
    row.question = as_str(raw.get("question"))[:QUESTION_CHARS]
    row.prediction = None if prediction is None else as_str(prediction)
    row.answer = as_str(raw.get("answer"))
    row.correct = correct if isinstance(correct, bool) else None
    row.accuracy = as_float(raw.get("accuracy"))
    row.reward = as_float(raw.get("reward"))
    row.advantage = as_float(raw.get("advantage"))
    components = raw.get("reward_components")
    if isinstance(components, dict):
        row.reward_components = {str(k): v for k, v in ((k, as_float(v)) for k, v in components.items()) if v is not None}
    row.facts = facts_of_json(raw)  # accepted calls, turns, format: counted as every path counts them
    row.turns = row.facts.turns
    row.calls = sum(row.facts.calls.values())
    row.score = as_float(last_evidence.get("score"))
    row.coverage = as_float(last_evidence.get("coverage"))
    row.failure = None if raw.get("failure") in (None, "") else as_str(raw.get("failure"))
    row.schema_version = raw.get("schema_version")
    if isinstance(raw.get("_problem"), str):  # a converted line that could not be used (viewer/verldump.py)
        row.problem = raw["_problem"]
    elif row.schema_version not in SCHEMA_VERSIONS:
        row.problem = f"unknown schema_version {row.schema_version!r} (this viewer reads {' and '.join(map(str, SCHEMA_VERSIONS))})"
    row.search_text = " ".join(
        [row.episode_id, row.sample_id, row.question, row.prediction or "", row.answer, row.failure or "", row.problem or ""]
    ).lower()
    return row


def broken_row(index: int, line: int, offset: int, length: int, problem: str) -> EpisodeRow:
    """A row for a line that could not be parsed at all."""
    return EpisodeRow(index=index, line=line, offset=offset, length=length, episode_id=f"line-{line}", problem=problem, search_text=problem.lower())


# ---- the index ---------------------------------------------------------------------------------
class RunIndex:
    """The episodes of one run folder, indexed by byte offset; safe to share between threads."""

    def __init__(self, run_dir: str | os.PathLike[str], key: str = "A") -> None:
        self.root = Path(run_dir).resolve()
        self.key = key
        self.path = self.root / TRAJECTORIES
        self._lock = threading.Lock()
        self._rows: list[EpisodeRow] = []
        self._tail: EpisodeRow | None = None  # an unfinished last line, re-read on every refresh
        self._by_id: dict[str, int] = {}
        self._by_sample: dict[str, list[int]] = {}
        self._by_group: dict[str, list[int]] = {}
        self._end = 0  # byte offset up to which complete lines are indexed
        self._lines = 0
        self._identity: tuple[int, int] | None = None
        self.status = ""  # a run-level message ("no trajectories.jsonl yet"), "" when fine

    # -- reading
    def refresh(self) -> None:
        """Index lines appended since the last call; rebuild if the file was replaced or shrank."""
        with self._lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                self._reset()
                self.status = f"{self.path.name} not found in {self.root}"
                return
            except OSError as exc:
                self._reset()
                self.status = f"{self.path.name} cannot be read: {exc.strerror}"
                return
            identity = (st.st_dev, st.st_ino)
            if identity != self._identity or st.st_size < self._end:
                self._reset()
                self._identity = identity
            self.status = "" if st.st_size else f"{self.path.name} is empty"
            if st.st_size == self._end and self._tail is None:
                return
            try:
                with self.path.open("rb") as fh:
                    fh.seek(self._end)
                    data = fh.read(st.st_size - self._end)
            except OSError as exc:
                self.status = f"{self.path.name} cannot be read: {exc.strerror}"
                return
            self._ingest(data)

    def _reset(self) -> None:
        self._rows, self._tail, self._by_id, self._by_sample, self._by_group = [], None, {}, {}, {}
        self._end = self._lines = 0
        self._identity = None

    def _ingest(self, data: bytes) -> None:
        """Index the complete lines of `data` (the bytes after `self._end`)."""
        self._tail = None
        pos = 0
        while pos < len(data):
            newline = data.find(b"\n", pos)
            complete = newline >= 0
            stop = newline if complete else len(data)
            chunk = data[pos:stop]
            line = self._lines + 1
            if not complete and not chunk.strip():
                break  # trailing whitespace without newline: wait for more
            if chunk.strip():
                row = self._parse(chunk, self._end + pos, line, final=complete)
                if row is None:  # an unfinished last line stays out of the committed rows
                    problem = f"line {line}: truncated last line ({len(chunk)} bytes without a newline)"
                    self._tail = broken_row(len(self._rows), line, self._end + pos, len(chunk), problem)
                    break
                self._add(row)
            self._lines = line
            pos = stop + 1 if complete else stop
        self._end += pos

    def _parse(self, chunk: bytes, offset: int, line: int, final: bool) -> EpisodeRow | None:
        """A row for one line; None for a last line without newline that does not parse yet."""
        index = len(self._rows)
        try:
            raw = json.loads(chunk)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if not final:
                return None
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
            col = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            return broken_row(index, line, offset, len(chunk), f"line {line}: invalid JSON ({msg}{col})")
        return summarize(raw, index, line, offset, len(chunk))

    def _add(self, row: EpisodeRow) -> None:
        first = self._by_id.get(row.episode_id)
        if first is not None:
            dup = f"duplicate episode_id {row.episode_id!r} (first on line {self._rows[first].line})"
            row.problem = dup if row.problem is None else f"{row.problem}; {dup}"
        else:
            self._by_id[row.episode_id] = row.index
        if row.sample_id:
            self._by_sample.setdefault(row.sample_id, []).append(row.index)
        group = row.group_id or row.sample_id
        if group:
            self._by_group.setdefault(group, []).append(row.index)
        self._rows.append(row)

    # -- access
    def rows(self) -> list[EpisodeRow]:
        """All rows, including a trailing truncated line if there is one."""
        with self._lock:
            return self._rows + ([self._tail] if self._tail is not None else [])

    def row(self, index: int) -> EpisodeRow | None:
        rows = self.rows()
        return rows[index] if 0 <= index < len(rows) else None

    def find(self, episode_id: str, sample_id: str = "") -> EpisodeRow | None:
        """The row with `episode_id`, else the first episode of `sample_id`, else None."""
        with self._lock:
            k = self._by_id.get(episode_id)
            if k is None and sample_id in self._by_sample:
                k = self._by_sample[sample_id][0]
            return self._rows[k] if k is not None else None

    def group(self, row: EpisodeRow) -> list[EpisodeRow]:
        """The rows of `row`'s group (its `group.id`, or its sample when the id is missing)."""
        with self._lock:
            return [self._rows[k] for k in self._by_group.get(row.group_id or row.sample_id, [])]

    def read(self, row: EpisodeRow) -> tuple[Any, str | None]:
        """The full parsed episode of `row` and a problem text (None when it parsed)."""
        if row.problem and (row.problem.startswith(f"line {row.line}: invalid") or "truncated" in row.problem):
            return None, row.problem
        try:
            with self.path.open("rb") as fh:
                fh.seek(row.offset)
                data = fh.read(row.length)
            return json.loads(data), None
        except (OSError, ValueError) as exc:
            return None, f"line {row.line}: cannot be read again ({exc})"


# ---- querying ----------------------------------------------------------------------------------
def matches(row: EpisodeRow, q: EpisodeQuery) -> bool:
    """Whether `row` passes every filter of `q`."""
    if q.outcome == "correct" and row.correct is not True:
        return False
    if q.outcome == "wrong" and row.correct is not False:
        return False
    if q.outcome == "unanswered" and not (row.problem is None and row.prediction is None):
        return False
    if q.outcome == "problem" and not (row.problem or row.failure):
        return False
    for name in ("policy", "problem_type", "task_kind", "role"):
        wanted = getattr(q, name)
        if wanted and getattr(row, name) != wanted:
            return False
    if q.reward_min is not None and (row.reward is None or row.reward < q.reward_min):
        return False
    if q.reward_max is not None and (row.reward is None or row.reward > q.reward_max):
        return False
    return not q.text or q.text.lower() in row.search_text


def sort_rows(rows: list[EpisodeRow], key: str, descending: bool) -> list[EpisodeRow]:
    """Rows ordered by `key`; rows without a value for it always come last, ties keep file order."""
    if key not in SORT_KEYS:
        raise ValueError(f"sort: unknown key {key!r}; one of {', '.join(SORT_KEYS)}")
    if key == "index":  # rows are kept in file order already
        return list(reversed(rows)) if descending else list(rows)
    get = attrgetter(key)
    present, absent = [], []
    for r in rows:
        (absent if get(r) is None else present).append(r)
    # list.sort is stable also with reverse=True, so ties keep file order either way
    present.sort(key=get, reverse=descending)
    return present + absent


def facets(rows: list[EpisodeRow]) -> dict[str, Any]:
    """Counts per value of each categorical field, and the reward range, for the filter controls."""
    out: dict[str, Any] = {}
    for name in ("policy", "problem_type", "task_kind", "role"):
        counts: dict[str, int] = {}
        for r in rows:
            value = getattr(r, name)
            if value:
                counts[value] = counts.get(value, 0) + 1
        out[name] = dict(sorted(counts.items()))
    rewards = [r.reward for r in rows if r.reward is not None]
    out["reward"] = [min(rewards), max(rewards)] if rewards else None
    out["outcome"] = {
        "correct": sum(r.correct is True for r in rows),
        "wrong": sum(r.correct is False for r in rows),
        "unanswered": sum(r.problem is None and r.prediction is None for r in rows),
        "problem": sum(bool(r.problem or r.failure) for r in rows),
    }
    return out


def select(rows: list[EpisodeRow], q: EpisodeQuery) -> tuple[int, list[EpisodeRow]]:
    """(number of matching rows, the rows of page `q.page`) after filtering and sorting."""
    if q.outcome not in OUTCOMES:
        raise ValueError(f"outcome: unknown value {q.outcome!r}; one of {', '.join(OUTCOMES)}")
    unfiltered = q.outcome == "all" and not (q.policy or q.problem_type or q.task_kind or q.role or q.text) \
        and q.reward_min is None and q.reward_max is None
    kept = sort_rows(rows if unfiltered else [r for r in rows if matches(r, q)], q.sort, q.descending)
    per_page = max(1, min(int(q.per_page), 500))
    start = max(0, int(q.page)) * per_page
    return len(kept), kept[start : start + per_page]

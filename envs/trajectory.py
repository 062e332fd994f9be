"""The record of one episode, as the env keeps it and as `trajectories.jsonl` stores it.

The env fills a `Trajectory` while it runs (frames held as arrays in memory, never in the JSON);
`TrajectoryWriter` saves the frames as JPEG files and writes one JSON line per episode with
`FrameRef` paths; `read_trajectories` reads them back. Every path writes this record (the rollout
runner, the local backend, verl's agent loop in its episode dump) and every reader reads it
(`videoseek eval`, `export-sft`, the viewer), so code that only reads or writes episodes needs
nothing beyond `videoseek.envs`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image
from pydantic_core import PydanticSerializationError

from videoseek.envs.actions import sanitize_text

from pydantic import BaseModel, ConfigDict, Field, model_validator

# 2: tool calls are recorded by name ({"type": "tool_call", "name", "arguments"} actions; `CallInfo`
# with `tool` and `arguments`). Version-1 records (crop_video only) are read as version 2.
SCHEMA_VERSION = 2


class FrameRef(BaseModel):
    t: float  # seconds in the source video (presentation time of the frame)
    path: str | None = None  # relative to the run directory
    masked: bool = False


class Observation(BaseModel):
    text: str
    frames: list[FrameRef] = Field(default_factory=list)


class CallInfo(BaseModel):
    """An accepted tool call: what the tool read and the evidence it added.

    `index` numbers the episode's accepted calls from 0, whatever their tool. `arguments` are the
    arguments as the tool read them (clipped values included), `requested` as the agent wrote them.
    A call that retrieved a time span (`crop_video`) has `start`/`end` and its evidence-score `gain`,
    `duplicate_of` (the `index` of an earlier call it nearly repeats), `fragment` and
    `best_prior_tiou`; a look at one frame's region (`zoom`) has `time`, `box` and `box_iou`, its
    IoU with the sample's key-frame boxes near that time (None: no boxes to compare with).
    """

    index: int
    tool: str = "crop_video"
    arguments: dict[str, Any] = Field(default_factory=dict)
    requested: dict[str, Any] = Field(default_factory=dict)
    clipped: bool = False
    start: float | None = None
    end: float | None = None
    gain: float = 0.0
    duplicate_of: int | None = None
    fragment: bool = False
    best_prior_tiou: float = 0.0
    time: float | None = None
    box: list[float] | None = None
    box_iou: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_schema_1(cls, data: Any) -> Any:
        """A version-1 call (crop_video: `requested` as [start, end], no tool or arguments)."""
        if isinstance(data, dict) and isinstance(data.get("requested"), (list, tuple)) and "tool" not in data:
            s, e = data["requested"]
            data = {**data, "tool": "crop_video", "requested": {"start": s, "end": e}, "arguments": {"start": data.get("start"), "end": data.get("end")}}
        return data

    @property
    def span(self) -> tuple[float, float] | None:
        return None if self.start is None or self.end is None else (self.start, self.end)


class Turn(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _from_schema_1(cls, data: Any) -> Any:
        """A version-1 action {"type": "crop_video", "start", "end"} read as a tool call."""
        if isinstance(data, dict) and isinstance(data.get("action"), dict) and data["action"].get("type") == "crop_video":
            a = data["action"]
            data = {**data, "action": {"type": "tool_call", "name": "crop_video", "arguments": {k: a[k] for k in ("start", "end") if k in a}}}
        return data

    @property
    def tool_name(self) -> str | None:
        """The tool this turn called (accepted or not); None for a think, answer or invalid turn."""
        return self.action.get("name") if self.action.get("type") == "tool_call" else None

    index: int
    assistant: str
    action: dict[str, Any]
    think: str | None = None
    repairs: list[str] = Field(default_factory=list)
    dialect: str = "none"
    error: str | None = None
    observation: Observation
    evidence: dict[str, float | None]
    call: CallInfo | None = None
    tokens: dict[str, int] | None = None
    forced: bool = False  # written by the episode's forced start (agents.groups.look_on_start), not the policy

    @property
    def refused(self) -> bool:
        """A malformed tool call or one the env rejected (both cost a turn and count as invalid calls)."""
        kind = self.action.get("type")
        return kind == "invalid" or (kind == "tool_call" and bool(self.error))


class GroupInfo(BaseModel):
    id: str
    index: int = 0
    role: Literal["origin", "perturbed"] = "origin"
    perturbation: dict[str, Any] | None = None


class Trajectory(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    episode_id: str
    sample_id: str
    policy: str = ""
    group: GroupInfo
    question: str
    options: list[str] | None = None
    answer: str
    problem_type: str
    duration: float
    clue_intervals: list[tuple[float, float]] = Field(default_factory=list)
    key_frames: list[dict[str, Any]] = Field(default_factory=list)
    data_source: str = ""
    task_kind: str | None = None
    video: str
    initial: Observation
    turns: list[Turn] = Field(default_factory=list)
    prediction: str | None = None
    correct: bool | None = None
    accuracy: float | None = None
    reward: float = 0.0
    reward_components: dict[str, float] = Field(default_factory=dict)
    advantage: float | None = None
    terminated: bool = False
    truncated: bool = False
    failure: str | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)

    @property
    def calls(self) -> list[CallInfo]:
        """The accepted tool calls, any tool, in order."""
        return [t.call for t in self.turns if t.call is not None]

    @property
    def invalid_calls(self) -> int:
        """Malformed tool calls and rejected ones (both cost a turn and count for the penalties)."""
        return sum(1 for t in self.turns if t.refused)


# ---- trajectory files ---------------------------------------------------------------------------
def episode_dir_name(episode_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in episode_id.replace("/", "__"))


def _fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (best effort: not every platform can open a folder)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class TrajectoryWriter:
    """Appends trajectories to `RUN/trajectories.jsonl`; frames go to `RUN/frames/<episode>/` as JPEG.

    Lines are split on "\n" only: a model's text may hold U+2028 or U+0085, which JSON leaves
    unescaped and `str.splitlines` would cut the line at (dropping the episode on resume).
    """

    def __init__(self, run_dir: str | Path, filename: str = "trajectories.jsonl", jpeg_quality: int = 90) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / filename
        self.jpeg_quality = jpeg_quality
        self._lock = threading.Lock()

    def finished_episodes(self) -> set[str]:
        """Episode ids already written (unreadable lines, e.g. one cut by a killed run, are dropped)."""
        return self._rewrite(lambda episode_id: True)

    def drop(self, episode_ids: set[str]) -> None:
        """Remove these episodes' lines (a group that is rerun is rewritten whole)."""
        self._rewrite(lambda episode_id: episode_id not in episode_ids)

    def _rewrite(self, keep: Callable[[str], bool]) -> set[str]:
        """Keep the readable lines whose episode `keep` accepts; the kept episode ids.

        Atomic: the kept lines go to a temporary file in the same folder, which is fsynced and
        then `os.replace`d over the file, so a kill at any moment leaves the old file or the new
        one, whole (rewriting in place once lost a run's 60k lines to a kill in that window). A
        file that would not change is not rewritten: a resume then writes nothing at all.
        """
        if not self.path.exists():
            return set()
        kept: set[str] = set()
        keep_line: list[bool] = []
        changed = False
        with self._lock:
            for stale in self.run_dir.glob(f".{self.path.name}.*.tmp"):  # left by a rewrite killed earlier
                stale.unlink(missing_ok=True)
            # errors="replace": a line cut by a kill may end inside a multi-byte character
            with self.path.open(encoding="utf-8", errors="replace", newline="\n") as src:
                for line in src:
                    ok = False
                    try:
                        episode_id = json.loads(line)["episode_id"]
                        ok = isinstance(episode_id, str) and bool(keep(episode_id))
                    except (ValueError, KeyError, TypeError, IndexError, RecursionError):  # ValueError: JSON errors too
                        pass
                    if ok:
                        kept.add(episode_id)
                    # a cut last line, even a readable one, must get its line end back
                    changed |= not ok or not line.endswith("\n")
                    keep_line.append(ok)
            if changed:
                self._replace(keep_line)
        return kept

    def _replace(self, keep_line: list[bool]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.run_dir, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with self.path.open(encoding="utf-8", errors="replace", newline="\n") as src, os.fdopen(fd, "w", encoding="utf-8", newline="\n") as dst:
                for line, ok in zip(src, keep_line):
                    if ok:
                        dst.write(line if line.endswith("\n") else line + "\n")
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(self.run_dir)

    def write(self, traj: Trajectory, frames_by_turn: dict[int, np.ndarray] | None = None) -> None:
        frames_by_turn = frames_by_turn or {}
        folder = Path("frames") / episode_dir_name(traj.episode_id)
        for turn, frames in frames_by_turn.items():
            refs = traj.initial.frames if turn < 0 else traj.turns[turn].observation.frames
            if len(frames) == 0:
                continue
            (self.run_dir / folder).mkdir(parents=True, exist_ok=True)
            tag = "init" if turn < 0 else f"t{turn:02d}"
            for k, (ref, frame) in enumerate(zip(refs, frames)):
                rel = folder / f"{tag}_{k:02d}.jpg"
                Image.fromarray(frame).save(self.run_dir / rel, quality=self.jpeg_quality)
                ref.path = rel.as_posix()
        try:
            line = traj.model_dump_json()
        except (PydanticSerializationError, UnicodeError, ValueError):
            # Last line of defence (text is sanitised on entry): one unwritable episode must not
            # abort the run. Non-JSON values become strings, unencodable characters U+FFFD.
            traj.metrics["sanitized_on_write"] = True
            line = sanitize_text(json.dumps(traj.model_dump(), ensure_ascii=False, default=str))[0]
        with self._lock, self.path.open("a", encoding="utf-8", newline="\n") as fh:
            fh.write(line + "\n")


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Read a run's trajectories (a run directory or the JSONL file); a truncated last line is skipped.

    Lines end at "\n" only (see `TrajectoryWriter`)."""
    path = Path(path)
    if path.is_dir():
        path = path / "trajectories.jsonl"
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        if line.strip():
            try:
                out.append(Trajectory.model_validate_json(line))
            except ValueError:
                continue
    return out


EPISODE_DUMP_FILE = re.compile(r"^(\d+)\.[^/]+\.jsonl$")  # training/verl_plugin/episode_dump.py: <prompt step>.<host>-<pid>.jsonl


def episode_dump_files(folder: str | Path) -> dict[int, list[Path]]:
    """{prompt step: [files]} of an agent-loop episode dump folder ({} when it cannot be listed)."""
    try:
        entries = sorted(Path(folder).iterdir())
    except OSError:
        return {}
    out: dict[int, list[Path]] = {}
    for f in entries:
        if (m := EPISODE_DUMP_FILE.match(f.name)) and f.is_file():
            out.setdefault(int(m.group(1)), []).append(f)
    return out


def read_episode_dump(folder: str | Path, step: int | None = None) -> tuple[int | None, list[Trajectory]]:
    """(step, trajectories) of verl's agent-loop episode dump (`rollout_data_dir/videoseek/`,
    written by `training/verl_plugin/episode_dump.py`): every episode of prompt step `step` (default: the
    latest step in the folder), origin and perturbed, in file order. Lines without a valid
    trajectory (older versions, a line still being written) are passed over."""
    files = episode_dump_files(folder)
    if not files:
        return None, []
    chosen = max(files) if step is None else step
    out = []
    for f in files.get(chosen, []):
        for line in f.read_text(encoding="utf-8", errors="replace").split("\n"):
            try:
                out.append(Trajectory.model_validate(json.loads(line)["trajectory"]))
            except (ValueError, KeyError, TypeError):
                continue
    return chosen, out

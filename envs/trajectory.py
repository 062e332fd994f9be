"""The record of one episode, as the env keeps it and as `trajectories.jsonl` stores it.

The env fills a `Trajectory` while it runs (frames held as arrays in memory, never in the JSON);
the rollout runner's `TrajectoryWriter` saves the frames as JPEG files and writes one JSON line per
episode with `FrameRef` paths. The viewer and the evaluator read these lines back with
`Trajectory.model_validate_json`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class FrameRef(BaseModel):
    t: float  # seconds in the source video (presentation time of the frame)
    path: str | None = None  # relative to the run directory
    masked: bool = False


class Observation(BaseModel):
    text: str
    frames: list[FrameRef] = Field(default_factory=list)


class CallInfo(BaseModel):
    """An accepted crop call as the evidence state saw it (after clipping)."""

    index: int
    start: float
    end: float
    requested: tuple[float, float]
    clipped: bool
    gain: float
    duplicate_of: int | None = None
    fragment: bool = False
    best_prior_tiou: float = 0.0


class Turn(BaseModel):
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
        return [t.call for t in self.turns if t.call is not None]

    @property
    def invalid_calls(self) -> int:
        """Malformed tool calls and rejected crops (both cost a turn and count for the penalties)."""
        return sum(1 for t in self.turns if t.action.get("type") == "invalid" or (t.action.get("type") == "crop_video" and t.error))

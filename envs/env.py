"""`VideoSeekEnv`: video question answering as a multi-turn decision process."""

from __future__ import annotations

import math
from functools import lru_cache
from collections.abc import Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from videoseek.envs.actions import (
    Action, Answer, CropVideo, Invalid, ParsedTurn, Think, ToolCall, action_to_dict, action_to_text, normalize_action, parse_action,
    sanitize_text,
)  # fmt: skip
from videoseek.envs import subtitles
from videoseek.envs.evidence import EvidenceState, episode_evidence
from videoseek.envs.tools import DEFAULT_TOOLS, Tool, ToolError, ToolResult, check_arguments, format_times, resolve_tools, system_prompt, think_nudge, tool_schemas, usage_hint
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.trajectory import CallInfo, FrameRef, GroupInfo, Observation, Trajectory, Turn
from videoseek.envs.video import DEFAULT_BACKEND, fit_pixels, fit_region, open_video, overlay_timestamp, reconcile_duration
from videoseek.rewards import EpisodeSummary, RewardConfig, accuracy_reward, score_episode
from videoseek.rewards.compose import PRESETS

Obs = dict[str, Any]
ActType = Any  # str (raw assistant text) or a structured Think / ToolCall / CropVideo / Answer

MAX_TEXT = 1 << 20


class FreeText(spaces.Text):
    """A text space that accepts any Unicode string up to `max_length` (questions may be Chinese)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


class TimeBox(spaces.Box):
    """A scalar Box that takes numpy scalars as they are.

    `Sequence(..., stack=True).contains` iterates a (n,) timestamp array into numpy scalars, which
    a plain Box casts with a "Casting input x to numpy array" warning on every check (gymnasium's
    passive env checker checks each observation).
    """

    def contains(self, x: Any) -> bool:
        if isinstance(x, np.generic):
            x = np.asarray(x)
        return super().contains(x)


class Perturbation(BaseModel):
    """How the agent's view of the video is altered for a perturbed group.

    kind: "mask" (DM-GRPO: zero the pixels of frames whose floor(time) lies in
    [floor(s), floor(e)], positions kept), "shuffle" (T-GRPO: random frame order within each
    observation), "blend" (SF-GRPO: f~_i = alpha*f_i + (1-alpha)*f~_{i-1}, alpha = 0.5, VideoMend §8.2).
    For "mask", give `time_range` or `pattern` (an index into the sample's `mask_patterns`).
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["mask", "shuffle", "blend"]
    time_range: tuple[float, float] | None = None
    pattern: int | None = None
    alpha: float = Field(default=0.5, ge=0.0, le=1.0)


# Documented ranges of the frame budgets (inclusive). The largest values the repo's configs use
# (8 frames per call, 64 frames, 392x392 pixels) lie well inside.
FRAME_RANGES: dict[str, tuple[int, int]] = {
    "frames_per_call": (1, 64),
    "max_total_frames": (0, 1024),
    "max_pixels": (28 * 28, 1024 * 1024),  # one merged Qwen-VL vision token .. 1 megapixel
}
MAX_EPISODE_FRAME_BYTES = 256 * 1024 * 1024  # max_total_frames * max_pixels * 3 (uint8 RGB) at most


class EnvConfig(BaseModel):
    """Knobs of `VideoSeekEnv`; budgets end or reject as documented on the env.

    Ranges (inclusive; a value outside raises a one-line error naming the field and the range):
    `frames_per_call` 1..64, `max_total_frames` 0..1024, `max_pixels` 784 (28x28)..1048576
    (1024x1024). `max_pixels=None` (native resolution) is rejected: one crop of 8 4K frames is
    about 200 MB. Frames are resized to at most `max_pixels` pixels (aspect ratio kept) and the
    episode's frames, initial ones included, never exceed `max_total_frames`, so the frames one
    episode holds take at most `max_total_frames * max_pixels * 3` bytes (uint8 RGB), and that
    product must be at most 256 MiB (`MAX_EPISODE_FRAME_BYTES`; the default 64 frames at 224x224
    is 9.6 MB). A masked or blended view holds its own copy of those frames, not more.
    """

    model_config = ConfigDict(extra="forbid")
    initial_frames: int = Field(default=8, ge=0, description="uniformly spaced sparse frames shown at reset")
    frames_per_call: int = Field(default=8, description="frames a crop_video call returns at most (1..64)")
    max_turns: int = Field(default=8, ge=1, description="assistant turns before the episode is truncated")
    max_total_frames: int = Field(default=64, description="frames over the whole episode, initial ones included (0..1024)")
    min_span: float = Field(default=0.5, ge=0.0, description="shortest crop in seconds; shorter calls are rejected")
    max_pixels: int = Field(default=224 * 224, description="per-frame pixel budget, aspect ratio kept (784..1048576)")
    timestamp_overlay: bool = Field(default=False, description="burn HH:MM:SS into each frame (VideoMend)")
    video_backend: Literal["decord", "pyav", "torchcodec"] = DEFAULT_BACKEND
    tools: list[str] = Field(default_factory=lambda: list(DEFAULT_TOOLS),
                             description="the tools the agent may call: registered names or import paths 'package.module:Class' "
                                         "(videoseek.envs.tools); [] (or False) is the no-tool baseline (NO_TOOL_SYSTEM_PROMPT, "
                                         "info['tools'] == [], every call refused); True is the default list")
    reward: RewardConfig = Field(default_factory=RewardConfig, description="a RewardConfig or a preset name (default csgrpo)")

    @field_validator("reward", mode="before")
    @classmethod
    def _preset_name(cls, value: Any) -> Any:
        """`reward="dmgrpo"` is short for `reward=RewardConfig(preset="dmgrpo")`."""
        if isinstance(value, str):
            if value not in PRESETS:
                raise ValueError(f"unknown reward preset {value!r}; expected one of {', '.join(PRESETS)} or a RewardConfig")
            return RewardConfig(preset=value)
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _tool_list(cls, value: Any) -> Any:
        """True / False (the switch of earlier versions) mean the default tools / none; a comma-separated
        string is a list; every entry must name a registered tool or an importable Tool class."""
        if value is True or value is None:
            return list(DEFAULT_TOOLS)
        if value is False:
            return []
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"tools must be a list of tool names, got {type(value).__name__}")
        resolve_tools(list(value))  # raises a one-line ValueError naming an unknown tool
        return list(value)

    @field_validator("frames_per_call", "max_total_frames", "max_pixels", mode="before")
    @classmethod
    def _not_none(cls, value: Any, info: Any) -> Any:
        if value is None:
            lo, hi = FRAME_RANGES[info.field_name]
            raise ValueError(f"{info.field_name} must be an integer in [{lo}, {hi}], got None (an unbounded budget)")
        return value

    @field_validator("frames_per_call", "max_total_frames", "max_pixels")
    @classmethod
    def _in_range(cls, value: int, info: Any) -> int:
        lo, hi = FRAME_RANGES[info.field_name]
        if not lo <= value <= hi:
            raise ValueError(f"{info.field_name} must be in [{lo}, {hi}], got {value}")
        return value

    @model_validator(mode="after")
    def _episode_bytes(self) -> EnvConfig:
        size = self.max_total_frames * self.max_pixels * 3
        if size > MAX_EPISODE_FRAME_BYTES:
            raise ValueError(
                f"max_total_frames * max_pixels * 3 = {size / 2**20:.0f} MiB of frames per episode exceeds "
                f"{MAX_EPISODE_FRAME_BYTES // 2**20} MiB; lower max_total_frames ({self.max_total_frames}) or max_pixels ({self.max_pixels})"
            )
        return self


def question_text(sample: VideoSample, duration: float, timestamps: np.ndarray) -> str:
    lines = [f"Video duration: {duration:.1f} seconds."]
    if len(timestamps):
        lines.append(f"You are shown {len(timestamps)} frames sampled at {format_times(timestamps)}.")
    lines.append(f"Question: {sample.question}")
    if sample.options:
        lines.append("Options:")
        lines.extend(sample.options)
    return "\n".join(lines)


class FrameStack(spaces.Space[np.ndarray]):
    """uint8 frames of shape (n, H, W, 3), n >= 0, each of at most `max_pixels` pixels.

    The frames of one observation share a size, but observations differ: the video's frames are
    (height, width), a `zoom` returns a region with the box's aspect ratio. `sample()` draws up to
    four frames of the video's size.
    """

    def __init__(self, height: int, width: int, max_pixels: int, seed: int | np.random.Generator | None = None) -> None:
        self.height, self.width, self.max_pixels = int(height), int(width), int(max_pixels)
        super().__init__(None, np.uint8, seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        n = int(self.np_random.integers(0, 5))
        return self.np_random.integers(0, 256, size=(n, self.height, self.width, 3), dtype=np.uint8)

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 4 and x.shape[-1] == 3
            and x.shape[1] * x.shape[2] <= max(self.max_pixels, self.height * self.width)
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"FrameStack(n, H, W, 3; video frames {self.height}x{self.width}, at most {self.max_pixels} pixels)"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FrameStack) and (self.height, self.width, self.max_pixels) == (other.height, other.width, other.max_pixels)


@lru_cache(maxsize=64)
def observation_space(height: int, width: int, max_pixels: int | None = None) -> spaces.Dict:
    """The observation space for a video's frame size (cached: G envs of a sample build it once)."""
    return spaces.Dict(
        {
            "text": FreeText(MAX_TEXT),
            "frames": FrameStack(height, width, max_pixels or height * width),
            "timestamps": spaces.Sequence(TimeBox(0.0, np.inf, shape=(), dtype=np.float64), stack=True),
        }
    )


class VideoSeekEnv(gym.Env[Obs, ActType]):
    """Answer a question about a video by looking at it, one turn at a time.

    ## Description
    The agent starts with the question and a few uniformly spaced frames of the video. Each turn it
    writes text: it thinks, calls one of its tools (`EnvConfig.tools`: `crop_video(start, end)`
    for frames of a time span by default, `zoom(time, box)` for a region of one frame at native
    resolution, or a tool of your own, `videoseek.envs.tools`), or answers. The env decodes real frames (PyAV, decord or torchcodec; shared frame cache), tracks the clue
    evidence the crops have gathered (`EvidenceState`, CS-GRPO) and scores the episode with the
    configured reward families when it ends.

    ## Action Space
    `FreeText`: the assistant's raw turn, parsed by `videoseek.envs.actions.parse_action`
    (Hermes `<tool_call>` JSON by default, lenient about syntax, every repair recorded). A
    structured `Think()`, `ToolCall(name, arguments)`, `CropVideo(start, end)` or `Answer(text)`
    is accepted too; its fields are checked (numpy scalars and numeric strings coerced; any other value is an invalid turn
    with `info["error"]`). Text that cannot be encoded (lone surrogates) is replaced by U+FFFD
    and counted in `info["sanitized"]` and the trajectory's `metrics["sanitized"]`.

    ## Observation Space
    A dict: `text` (the prompt or the tool response), `frames` (uint8, shape (n, H, W, 3), n may be
    0; the caller's own array, or the shared read-only one with `share_frames=True`) and
    `timestamps` (float64, shape (n,), seconds in the source video).

    ## Info
    `reset` returns `info["instructions"]` (the system prompt: the answer format and how to call
    the tools) and `info["tools"]` (the configured tools' OpenAI function schemas), both built
    from `EnvConfig.tools` (`videoseek.envs.tools`), with `info["turn"] = 0` and the evidence snapshot. `step` returns
    `info["turn"]`: the 0-based index of the turn just played, equal to its `Turn.index` in the
    trajectory (0 after the first step), with `error`, `action`, `repairs` and `evidence`; the
    last step adds `reward_components`, `prediction` and `correct`.

    ## Rewards
    0 on every non-terminal step. When the episode ends (answer or truncation) the reward is the
    weighted sum of the components of `EnvConfig.reward` (a `RewardConfig` or a preset name,
    `csgrpo` by default: accuracy, format, clue-seek, grounding), reported in
    `info["reward_components"]`. A structured `Answer(text)` is scored as its text
    `<answer>text</answer>`: it holds no `<think>`, so its format reward is that of that text.
    Group-level rewards (DM-GRPO, T-GRPO, ProcessThinker) need several episodes: see
    `videoseek.rewards.score_group`.

    ## Episode End
    Terminated when the agent answers. Truncated after `max_turns` turns without an answer.
    `step` before `reset` raises RuntimeError("call reset() before step()"); `step` after the
    episode ended raises a RuntimeError that says so.
    A tool call that is malformed, names a tool the env lacks, fails the tool's argument schema
    (wrong type, missing field, non-finite number), is refused by the tool (`ToolError`: a crop
    with start >= end, outside the video or shorter than `min_span`; a degenerate zoom box) or
    finds the frame budget spent is rejected: a text-only observation, `info["error"]` says why,
    and the turn is spent.

    ## Arguments
    - `sample`: a `VideoSample`.
    - `config`: an `EnvConfig` (defaults: 8 initial frames, 8 frames per call, 8 turns, 64 frames).
    - `render_mode`: None, "rgb_array" (a contact sheet of the last observation's frames, each
      labelled with its time) or "ansi" (a text summary: sample, turn, frames used, last
      observation text). Any other mode raises ValueError.
    - `share_frames` (keyword, default False): False gives every observation its own writable
      `frames` array (a copy), as gymnasium's contract and `check_env` expect. True hands out the
      shared frame cache's read-only array itself (write to a `.copy()`): the G episodes of a
      sample, or any episodes on the same frames, then hold one copy of them. The episode drivers
      set it (`agents.rollout`, verl's `VideoSeekAgentLoop`), where 64 concurrent episodes of an
      hour-long video fit in 2 GB because of it (`bench/bench_long_video.py`). The env keeps the
      shared arrays for its own record (`frames_by_turn`) either way.
    """

    metadata = {"render_modes": ["rgb_array", "ansi"]}

    def __init__(self, sample: VideoSample, config: EnvConfig | None = None, render_mode: str | None = None, *, share_frames: bool = False) -> None:
        if not isinstance(sample, VideoSample):
            sample = VideoSample.model_validate(sample)
        self.sample = sample
        self.config = config or EnvConfig()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; expected None or one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.share_frames = bool(share_frames)
        try:
            self.video = open_video(sample.video, self.config.video_backend)
        except DataError as exc:
            raise DataError(f"sample {sample.id}: {exc}") from None
        # A declared duration off the file's (warned once per video) would put sparse frames and
        # crops past the real end, where every time maps to the last frame: use the video's.
        self.duration = reconcile_duration(sample.video, sample.duration, self.video.duration, where=f"sample {sample.id}")
        try:
            sample.check_within(self.video.duration)
        except ValueError as exc:
            raise DataError(f"sample {sample.id} ({sample.video}): {exc}") from None

        w, h = fit_pixels(self.video.info.width, self.video.info.height, self.config.max_pixels)
        self.observation_space = observation_space(h, w, self.config.max_pixels)
        self.action_space = FreeText(MAX_TEXT)
        self._frame_shape = (h, w, 3)
        # One instance of each configured tool, by name: calls are dispatched here.
        self.tools: dict[str, Tool] = {cls.name: cls() for cls in resolve_tools(self.config.tools)}
        self.evidence = self._new_evidence()
        self.trajectory: Trajectory | None = None
        self.frames_by_turn: dict[int, np.ndarray] = {}  # -1: initial frames; k: frames returned at turn k
        self._perturbation: Perturbation | None = None
        self._mask_range: tuple[float, float] | None = None
        self._done = True
        self._frames_used = 0
        self._last_frames = np.zeros((0, h, w, 3), np.uint8)
        self._last_times = np.zeros(0)
        self._last_text = ""

    # ---- gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        pert = options.get("perturbation")
        self._perturbation = None if pert is None else (pert if isinstance(pert, Perturbation) else Perturbation.model_validate(pert))
        self._mask_range = self._resolve_mask(self._perturbation)
        self.evidence = self._new_evidence()
        self._call_of_span: list[int] = []  # CallInfo.index of each temporal-evidence call, in order
        self.frames_by_turn = {}
        self._frames_used = 0
        self._done = False

        n = min(self.config.initial_frames, self.config.max_total_frames)
        times = (np.arange(n) + 0.5) * self.duration / n if n else np.zeros(0)
        frames, ts = self.read_frames(times)
        masked = self._masked(ts)
        self._frames_used += len(ts)
        self.frames_by_turn[-1] = frames
        text = question_text(self.sample, self.duration, ts)
        subs = self._subtitles(ts)
        if subs:  # Video-MME's order: the subtitles, then the question
            text = f"{subs}\n{text}"
        if self.sample.metadata.get("subtitle_prompt"):  # Video-MME-v2's concatenated mode: all words at once
            text = f"{self.sample.metadata['subtitle_prompt']}{text}"
        segments = self._segments(ts, self.duration)
        if segments:  # Video-MME-v2's interleaved mode
            text = f"{segments}\n{subtitles.V2_WITH_SUB_PROMPT_INTERLEAVE}\n{text}"
        group = options.get("group") or {"id": self.sample.id}
        self.trajectory = Trajectory(
            episode_id=str(options.get("episode_id", self.sample.id)),
            sample_id=self.sample.id,
            policy=str(options.get("policy", "")),
            group=GroupInfo.model_validate(
                {**group, "role": "perturbed" if self._perturbation else "origin", "perturbation": self._perturbation_dict()}
            ),
            question=self.sample.question,
            options=self.sample.options,
            answer=self.sample.answer,
            problem_type=self.sample.problem_type.value,
            duration=self.duration,
            clue_intervals=[tuple(c) for c in self.sample.clue_intervals],
            key_frames=[k.model_dump() for k in self.sample.key_frames],
            data_source=self.sample.data_source,
            task_kind=self.sample.metadata.get("task_kind"),
            video=self.sample.video,
            initial=Observation(text=text, frames=self._frame_refs(ts, masked)),
        )
        self._last_frames, self._last_times, self._last_text = frames, ts, text
        info = {
            "error": None,
            "turn": 0,
            "evidence": self.evidence.snapshot(),
            "instructions": self.instructions,
            "tools": self.tool_schemas,
        }
        return self._obs(text, frames, ts), info

    def step(self, action: ActType) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if self.trajectory is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        parsed, raw, sanitized = self._parse(action)
        turn = len(self.trajectory.turns)
        error: str | None = None
        call: CallInfo | None = None
        frames = np.zeros((0, *self._frame_shape), np.uint8)
        ts = np.zeros(0)
        masked = np.zeros(0, bool)
        terminated = False
        act = parsed.action

        if isinstance(act, Answer):
            text = "Answer received."
            terminated = True
        elif isinstance(act, (ToolCall, CropVideo)):
            text, frames, ts, call, error = self._call_tool(act.name, act.arguments, parsed.repairs)
            masked = self._masked(ts)
        elif isinstance(act, Invalid):
            error = act.reason
            text = f"Error: {error}. {usage_hint(list(self.tools.values()))}"
        else:
            text = think_nudge(list(self.tools.values()))

        self.frames_by_turn[turn] = frames
        self.trajectory.turns.append(
            Turn(
                index=turn,
                assistant=raw,
                action=action_to_dict(act),
                think=parsed.think,
                repairs=parsed.repairs,
                dialect=parsed.dialect,
                error=error,
                observation=Observation(text=text, frames=self._frame_refs(ts, masked)),
                evidence={**self.evidence.snapshot(), "gain": call.gain if call and call.span else None},
                call=call,
            )
        )
        truncated = not terminated and turn + 1 >= self.config.max_turns
        info: dict[str, Any] = {
            "error": error,
            "action": action_to_dict(act),
            "repairs": list(parsed.repairs),
            "evidence": self.evidence.snapshot(),
            "turn": turn,  # the 0-based index of the turn just played (= Turn.index)
        }
        if sanitized:  # unencodable characters replaced on entry: recorded, the episode goes on
            info["sanitized"] = sanitized
            self.trajectory.metrics["sanitized"] = self.trajectory.metrics.get("sanitized", 0) + sanitized
        reward = 0.0
        if terminated or truncated:
            reward = self._finish(act, terminated, truncated, info)
        obs = self._obs(text if not truncated else text + " Turn budget exhausted.", frames, ts)
        if len(frames):
            self._last_frames, self._last_times = frames, ts
        self._last_text = obs["text"]
        return obs, reward, terminated, truncated, info

    def render(self) -> np.ndarray | str | None:
        """The render of `render_mode`: None when it is None.

        "rgb_array": the frames of the last observation that had frames (the initial ones at
        first), side by side, each with its time (seconds) burnt into its top-left corner; one
        black frame before there are any. "ansi": sample id, turn, frames used and the last
        observation's text.
        """
        if self.render_mode == "ansi":
            return self._ansi()
        if self.render_mode != "rgb_array":
            return None
        frames, times = self._last_frames, self._last_times
        if len(frames) == 0:
            return np.zeros(self._frame_shape, np.uint8)
        return np.concatenate([overlay_timestamp(f, t, clock=False) for f, t in zip(frames, times)], axis=1)

    def _ansi(self) -> str:
        turns = len(self.trajectory.turns) if self.trajectory is not None else 0
        state = "not reset" if self.trajectory is None else ("done" if self._done else "running")
        return (
            f"sample {self.sample.id} | turn {turns}/{self.config.max_turns} | "
            f"frames {self._frames_used}/{self.config.max_total_frames} | {state}\n{self._last_text}\n"
        )

    def __repr__(self) -> str:
        turns = len(self.trajectory.turns) if self.trajectory is not None else 0
        return (
            f"VideoSeekEnv(sample={self.sample.id!r}, turn={turns}/{self.config.max_turns}, "
            f"frames={self._frames_used}/{self.config.max_total_frames})"
        )

    def __str__(self) -> str:  # gymnasium's Env.__str__ would print the class name only
        return repr(self)

    # ---- episode summary -------------------------------------------------------------------
    def summary(self) -> EpisodeSummary:
        """The finished (or running) episode as the reward functions read it."""
        assert self.trajectory is not None
        turns = self.trajectory.turns
        answer = next((t.action["text"] for t in turns if t.action["type"] == "answer"), None)
        return EpisodeSummary(
            prediction=answer,
            assistant_turns=[t.assistant for t in turns],
            calls=self.evidence.call_spans(),
            call_frames=self.evidence.call_frames(),
            zooms=self.evidence.region_looks(),
            invalid_calls=self.trajectory.invalid_calls,
            duration=self.duration,
            truncated=self.trajectory.truncated,
        )

    def _finish(self, act: Action, terminated: bool, truncated: bool, info: dict[str, Any]) -> float:
        traj = self.trajectory
        assert traj is not None
        traj.terminated, traj.truncated = terminated, truncated
        self._done = True
        total, components = score_episode(self.sample, self.summary(), self.config.reward)
        # Accuracy is always recorded for evaluation, weighted into the reward or not.
        accuracy = components.get("accuracy")
        if accuracy is None:
            accuracy = accuracy_reward(act.text if isinstance(act, Answer) else None, self.sample)
        traj.prediction = act.text if isinstance(act, Answer) else None
        traj.accuracy = accuracy
        traj.correct = bool(accuracy >= self.config.reward.correct_threshold)
        traj.reward, traj.reward_components = float(total), dict(components)
        traj.metrics.update(
            coverage=self.evidence.coverage,
            evidence=self.evidence.score,
            precision=self.evidence.precision,
            calls=len(traj.calls),
            invalid_calls=traj.invalid_calls,
            frames=self._frames_used,
        )
        info.update(reward_components=dict(components), prediction=traj.prediction, correct=traj.correct)
        return float(total)

    # ---- helpers ---------------------------------------------------------------------------
    def _parse(self, action: ActType) -> tuple[ParsedTurn, str, int]:
        """(parsed turn, the text recorded as the assistant's turn, characters sanitised).

        Text is made encodable first (lone surrogates -> U+FFFD; see `sanitize_text`): it goes
        into the trajectory, which must serialise. A structured action has its fields checked
        (`normalize_action`: any value gives a valid action or an `Invalid` one) and is recorded
        as the text a model would have written for it.
        """
        if isinstance(action, (Think, ToolCall, CropVideo, Answer, Invalid)):
            act, sanitized = normalize_action(action)
            parsed, raw = ParsedTurn(act, dialect="structured"), action_to_text(act)
        elif isinstance(action, str):
            raw, sanitized = sanitize_text(str(action))
            parsed = parse_action(raw)
        else:
            parsed, raw, sanitized = parse_action(action), "", 0
        if sanitized:
            parsed.repairs.append(f"replaced {sanitized} unencodable character(s) (lone surrogates) with U+FFFD")
        return parsed, raw, sanitized

    def _subtitles(self, ts: np.ndarray, header: str = subtitles.HEADER) -> str:
        """The subtitle lines of the frames at `ts` (the sample's ``metadata["subtitles"]``, the
        with-subtitles setting; `videoseek.envs.subtitles`), "" for a sample without subtitles."""
        subs = self.sample.metadata.get("subtitles")
        return subtitles.subtitle_block(subs, [float(t) for t in ts], header) if subs else ""

    def _segments(self, ts: np.ndarray, end: float) -> str:
        """Video-MME-v2's interleaved subtitle lines of the frames at `ts` up to `end` (the sample's
        ``metadata["subtitle_segments"]``; `videoseek.envs.subtitles`), "" without segments."""
        segments = self.sample.metadata.get("subtitle_segments")
        if not segments:
            return ""
        return "\n".join(subtitles.interleaved_lines(segments, sorted(float(t) for t in ts), float(end)))

    # ---- tools ---------------------------------------------------------------------------------
    @property
    def instructions(self) -> str:
        """The system prompt for this env's tools (`videoseek.envs.tools.system_prompt`)."""
        return system_prompt(list(self.tools.values()))

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI function schemas of this env's tools, in order (fresh copies)."""
        return tool_schemas(list(self.tools.values()))

    @property
    def frames_left(self) -> int:
        """Frames the episode may still receive (`max_total_frames` less those shown so far)."""
        return max(0, self.config.max_total_frames - self._frames_used)

    def read_frames(
        self,
        times: Sequence[float],
        *,
        max_pixels: int | None = None,
        box: Sequence[float] | None = None,
        distinct: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The frames shown at `times`, as this episode's observations hold them: (uint8 (n, H, W, 3), seconds (n,)).

        Frames come through the video's shared, bounded frame cache and get the episode's
        perturbation (a DM-GRPO mask zeroes a frame whose time is masked, as for any frame).
        `max_pixels` overrides the env's per-frame pixel budget (aspect ratio kept, never
        upscaled); `box` = [x1, y1, x2, y2] (fractions of width and height, inside [0, 1]) cuts
        that region from the frame decoded at native resolution, then fits it to the budget
        (`video.fit_region`: a region under 32 px a side is enlarged to it, a thinner one than the
        budget allows is a `ToolError`);
        `distinct` returns each frame once when several times fall on one frame. Reading does not
        spend the frame budget: the env counts the frames a tool returns.
        """
        idx = self.video.indices_at(np.asarray(times, dtype=np.float64)) if len(times) else np.zeros(0, int)
        if distinct:
            idx = np.unique(idx)
        budget = self.config.max_pixels if max_pixels is None else int(max_pixels)
        overlay = self.config.timestamp_overlay
        if box is None:
            frames, ts = self.video.frames_by_index(idx, max_pixels=budget, overlay=overlay)
        else:
            frames, ts = self._regions(idx, box, budget, overlay)
        return self._perturb(frames, ts)

    def _regions(self, idx: np.ndarray, box: Sequence[float], budget: int, overlay: bool) -> tuple[np.ndarray, np.ndarray]:
        """The region `box` of each frame `idx`, cut at native resolution and resized to `budget` pixels."""
        native, ts = self.video.frames_by_index(idx, max_pixels=None)
        h, w = native.shape[1:3]
        x1, y1, x2, y2 = (min(max(float(v), 0.0), 1.0) for v in box)
        # Pixel edges of the region, at least one pixel wide and high.
        left, top = min(int(round(x1 * w)), w - 1), min(int(round(y1 * h)), h - 1)
        right, bottom = max(int(round(x2 * w)), left + 1), max(int(round(y2 * h)), top + 1)
        try:
            size = fit_region(right - left, bottom - top, budget)
        except ValueError as exc:
            raise ToolError(f"{exc}; choose a wider box") from None
        out = []
        for frame, t in zip(native, ts):
            crop = frame[top:bottom, left:right]
            if (crop.shape[1], crop.shape[0]) != size:
                crop = np.asarray(Image.fromarray(crop).resize(size, Image.BILINEAR))
            out.append(overlay_timestamp(np.ascontiguousarray(crop), t) if overlay else crop)
        frames = np.stack(out) if out else np.zeros((0, size[1], size[0], 3), np.uint8)
        return np.ascontiguousarray(frames), ts

    def _call_tool(self, name: str, arguments: dict[str, Any], repairs: list[str]) -> tuple[str, np.ndarray, np.ndarray, CallInfo | None, str | None]:
        """Run one tool call: (text, frames, timestamps, call record, error). Never raises for what
        a policy wrote: an unknown tool, bad arguments or a `ToolError` is an error observation."""
        empty = np.zeros((0, *self._frame_shape), np.uint8), np.zeros(0)
        tool = self.tools.get(name)
        if tool is None:
            if not self.tools:
                error = f"{name} is not available in this episode (no-tool mode); answer in <answer></answer>"
            else:
                error = f"unknown tool {name[:40]!r}; this episode's tools: {', '.join(self.tools)}"
            return f"Error: {error}", *empty, None, error
        args, error = check_arguments(type(tool), arguments)
        if error is None and tool.returns_frames and self.frames_left <= 0:
            error = f"frame budget of {self.config.max_total_frames} frames is spent; answer now"
        if error is None:
            try:
                result = tool.run(self, **args)
            except ToolError as exc:
                error = " ".join(str(exc).split())[:300] or f"{name} refused the call"
            except DataError:
                raise  # a broken video is the data's fault, not the policy's: the episode fails
            except Exception as exc:  # a tool's bug must not end a training run: the turn says what broke
                error = f"{name} failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        if error is not None:
            return f"Error: {error}", *empty, None, error
        frames, ts = self._checked_frames(name, result)
        self._frames_used += len(ts)
        index = len(self.trajectory.calls)
        fields: dict[str, Any] = {}
        if result.span is not None:
            ev = self.evidence.add(*result.span, frame_times=ts)  # the frames shown, after the budget's cut
            self._call_of_span.append(index)
            dup = None if ev.duplicate_of is None else self._call_of_span[ev.duplicate_of]
            fields.update(start=ev.start, end=ev.end, gain=ev.gain, duplicate_of=dup, fragment=ev.adjacent_to_previous, best_prior_tiou=ev.best_prior_tiou)
        if result.region is not None:
            t, box = result.region
            fields.update(time=float(t), box=[float(v) for v in box], box_iou=self.evidence.add_region(t, box))
        call = CallInfo(index=index, tool=name, arguments=result.arguments if result.arguments is not None else args,
                        requested=args, clipped=bool(result.clipped), **fields)  # fmt: skip
        text = result.text
        if len(ts):
            subs = self._subtitles(ts, header="Subtitles at these frames:")
            if subs:
                text = f"{text}\n{subs}"
            segments = self._segments(ts, result.span[1] if result.span else float(np.max(ts)))
            if segments:
                text = f"{text}\nSubtitles between these frames:\n{segments}"
        return text, frames, ts, call, None

    def _checked_frames(self, name: str, result: ToolResult) -> tuple[np.ndarray, np.ndarray]:
        """A tool's frames and times as observations hold them; a malformed result is the tool's bug (ValueError)."""
        if result.frames is None or len(result.frames) == 0:
            return np.zeros((0, *self._frame_shape), np.uint8), np.zeros(0)
        frames, ts = np.asarray(result.frames), np.asarray(result.timestamps, dtype=np.float64)
        if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or ts.shape != (len(frames),):
            raise ValueError(f"tool {name} returned frames {frames.dtype} {frames.shape} with timestamps {ts.shape}; "
                             "expected uint8 (n, H, W, 3) and (n,) (read them with env.read_frames)")  # fmt: skip
        if len(frames) > self.frames_left:
            frames, ts = frames[: self.frames_left], ts[: self.frames_left]
        return frames, ts

    def _new_evidence(self) -> EvidenceState:
        """An empty evidence state whose duplicate, fragment and region thresholds are the episode's
        reward config's (`RewardConfig.clue_seek`), so the call record agrees with the reward."""
        key_frames = [k.model_dump() for k in self.sample.key_frames]
        return episode_evidence(self.sample.clue_intervals, self.duration, self.config.reward, key_frames)

    def _masked(self, ts: np.ndarray) -> np.ndarray:
        """Which of these frame times the episode's mask perturbation blanks (DM-GRPO)."""
        if self._mask_range is None or len(ts) == 0:
            return np.zeros(len(ts), bool)
        lo, hi = math.floor(self._mask_range[0]), math.floor(self._mask_range[1])
        return (np.floor(ts) >= lo) & (np.floor(ts) <= hi)

    def _resolve_mask(self, p: Perturbation | None) -> tuple[float, float] | None:
        if p is None or p.kind != "mask":
            return None
        if p.time_range is not None:
            return p.time_range
        patterns = self.sample.mask_patterns
        if p.pattern is None or not (0 <= p.pattern < len(patterns)):
            raise ValueError(f"sample {self.sample.id}: mask perturbation needs time_range or a pattern index < {len(patterns)}")
        return patterns[p.pattern].time_range

    def _perturbation_dict(self) -> dict[str, Any] | None:
        if self._perturbation is None:
            return None
        d = self._perturbation.model_dump(exclude_none=True)
        if self._mask_range is not None:
            d["time_range"] = list(self._mask_range)
            if self._perturbation.pattern is not None:
                d["oracle_correct"] = self.sample.mask_patterns[self._perturbation.pattern].oracle_correct
        return d

    def _perturb(self, frames: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self._perturbation
        if p is None or len(ts) == 0:
            return frames, ts
        if p.kind == "mask":
            masked = self._masked(ts)
            if masked.any():
                frames = frames.copy()
                frames[masked] = 0  # pixels zeroed, time positions kept (VideoMend §5.2)
        elif p.kind == "shuffle":
            frames = frames[self.np_random.permutation(len(frames))]
        elif p.kind == "blend":
            out = frames.astype(np.float32)
            for i in range(1, len(out)):  # recursive, as VideoMend's SF-GRPO code blends in place
                out[i] = p.alpha * out[i] + (1 - p.alpha) * out[i - 1]
            frames = np.round(out).astype(np.uint8)
        return frames, ts

    def _frame_refs(self, ts: np.ndarray, masked: np.ndarray) -> list[FrameRef]:
        return [FrameRef(t=float(t), masked=bool(m)) for t, m in zip(ts, masked)]

    def _obs(self, text: str, frames: np.ndarray, ts: np.ndarray) -> Obs:
        """The observation dict. Its frames are a fresh, writable array, the caller's own (gymnasium's
        contract: `check_env` fails on two observations sharing memory); with `share_frames` they are
        the frame cache's read-only array itself, shared by every episode that sees those frames."""
        return {"text": text, "frames": frames if self.share_frames else frames.copy(), "timestamps": np.array(ts, dtype=np.float64)}

"""Play mode: a person acts as the agent through the same `VideoSeekEnv` a policy uses.

The page offers the env's own tools (`info["tools"]`, the configured `EnvConfig.tools`) and turns
each gesture into the assistant text a model would write (default Hermes dialect): a call of any
tool becomes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (a drag on the timeline
fills a tool's `start`/`end`, or its `time`; a box dragged on a frame fills its `time` and `box`),
a typed answer becomes `<answer>...</answer>`, an optional note becomes `<think>...</think>`; raw
text can be sent as is. So play goes through the env's own parser, tools, evidence state and
rewards, and the saved episode is a normal trajectory (policy "human") whose assistant texts can
serve as demonstrations. Finished episodes are written with the rollout runner's
`TrajectoryWriter` to `RUN/play/trajectories.jsonl` and `RUN/play/frames/`.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

MAX_SESSIONS = 8  # open play sessions kept; the oldest is dropped (its env closed) beyond this
MAX_TEXT = 8000  # characters of one typed turn
MAX_NAME = 100  # characters of a tool name
# Computed from the answer key (clue intervals, key-frame boxes): sent only once the episode has ended.
ANSWER_KEY_FIELDS = ("gain", "best_prior_tiou", "box_iou")
POLICY_NAME = "human"
SAMPLE_FILES = ("samples.jsonl", "data.jsonl")  # looked for in the run folder when --data is not given


def _first_video(run_dir: Path) -> Path | None:
    """The `video` of the first readable trajectory of the run (resolved against the run folder)."""
    path = run_dir / "trajectories.jsonl"
    try:
        with path.open("rb") as fh:
            for _, line in zip(range(50), fh):
                try:
                    video = json.loads(line).get("video")
                except (ValueError, AttributeError):
                    continue
                if isinstance(video, str) and video:
                    return Path(video) if Path(video).is_absolute() else run_dir / video
    except OSError:
        return None
    return None


def find_samples_file(run_dir: Path) -> Path | None:
    """The dataset a run was made from, or None.

    In order: `RUN/run.json`'s "data" (a path or list of paths); a `samples.jsonl` / `data.jsonl`
    in the run folder; a `samples.jsonl` beside or one level above the folder of the run's first
    video (the layout `videoseek synth` writes: DIR/samples.jsonl and DIR/videos/*.mp4).
    """
    manifest = run_dir / "run.json"
    if manifest.is_file():
        try:
            data = json.loads(manifest.read_text(encoding="utf-8")).get("data")
        except (ValueError, AttributeError, OSError):
            data = None
        for candidate in data if isinstance(data, list) else [data]:
            if isinstance(candidate, str):
                path = Path(candidate) if Path(candidate).is_absolute() else run_dir / candidate
                if path.is_file():
                    return path
    for name in SAMPLE_FILES:
        if (run_dir / name).is_file():
            return run_dir / name
    video = _first_video(run_dir)
    if video is not None:
        for folder in (video.parent, video.parent.parent):
            if (folder / "samples.jsonl").is_file():
                return folder / "samples.jsonl"
    return None


def tool_call_text(name: str, arguments: dict[str, Any], think: str = "") -> str:
    """The Hermes-dialect assistant text for a call of tool `name` (with an optional think part)."""
    from videoseek.envs.actions import ToolCall, action_to_text

    return (f"<think>{think}</think>" if think else "") + action_to_text(ToolCall(name, arguments))


def answer_text(answer: str, think: str = "") -> str:
    """The assistant text for a final answer (with an optional think part)."""
    return (f"<think>{think}</think>" if think else "") + f"<answer>{answer}</answer>"


def assistant_text(action: Any) -> str:
    """The assistant text for a play action from the page; `ValueError` names what is wrong.

    Actions: {"type": "tool_call", "name", "arguments", "think"?} (any tool; the env checks the
    name and arguments, as for a model's call), {"type": "answer", "text", "think"?}, {"type":
    "text", "text"} (raw, sent through the parser unchanged), and the version-1 shape of a span
    call {"type": <tool>, "start", "end", "think"?} (times written to the millisecond).
    """
    from videoseek.envs.actions import tool_call_of

    if not isinstance(action, dict):
        raise ValueError("action must be an object with a 'type'")  # noqa: TRY004 - answered as a bad request
    kind = action.get("type")
    think = action.get("think") or ""
    if not isinstance(think, str) or len(think) > MAX_TEXT:
        raise ValueError(f"action.think must be text of at most {MAX_TEXT} characters")
    if kind in ("answer", "text"):
        text = action.get("text")
        if not isinstance(text, str) or len(text) > MAX_TEXT:
            raise ValueError(f"action.text must be text of at most {MAX_TEXT} characters")
        return answer_text(text.strip(), think) if kind == "answer" else text
    if kind == "tool_call":
        name, arguments = action.get("name"), action.get("arguments", {})
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
            raise ValueError(f"action.name must be a tool name of at most {MAX_NAME} characters")
        if not isinstance(arguments, dict):
            raise ValueError("action.arguments must be an object of the tool's arguments")
        if len(json.dumps(arguments, default=str)) > MAX_TEXT:
            raise ValueError(f"action.arguments must be at most {MAX_TEXT} characters as JSON")
        return tool_call_text(name.strip(), arguments, think)
    named = tool_call_of(action) if isinstance(kind, str) else None
    if named is not None:  # the version-1 span call
        try:
            start, end = float(action["start"]), float(action["end"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("action.start and action.end must be numbers (seconds)") from None
        return tool_call_text(named[0], {"start": round(start, 3), "end": round(end, 3)}, think)
    raise ValueError(f"action.type {kind!r} is not one of tool_call, answer, text")


def jpeg_bytes(frame: np.ndarray, quality: int = 85) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


@dataclass
class PlaySession:
    id: str
    env: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    saved: dict[str, Any] | None = None


class PlayManager:
    """Play sessions over the samples of one dataset; saves finished episodes under `play_dir`."""

    def __init__(self, samples_path: Path | None, play_dir: Path, env_config: Any = None) -> None:
        self.samples_path = samples_path
        self.play_dir = Path(play_dir)
        self.env_config = env_config
        self._samples: dict[str, Any] | None = None
        self._load_error: str | None = None
        self._sessions: OrderedDict[str, PlaySession] = OrderedDict()
        self._lock = threading.Lock()

    # ---- dataset
    def available(self) -> tuple[bool, str | None]:
        """(True, None) when samples are loaded; else (False, why)."""
        if self.samples_path is None:
            return False, "no dataset: start the viewer with --data samples.jsonl"
        self._load()
        return (self._load_error is None), self._load_error

    def _load(self) -> None:
        with self._lock:
            if self._samples is not None or self._load_error is not None:
                return
            from videoseek.envs.sample import DataError, VideoSample

            try:
                self._samples = {s.id: s for s in VideoSample.from_jsonl(self.samples_path)}
            except DataError as exc:
                self._load_error = str(exc)

    def samples(self) -> dict[str, Any]:
        assert self._samples is not None
        return {
            "path": str(self.samples_path),
            "samples": [
                {"id": s.id, "question": s.question, "problem_type": s.problem_type.value, "options": s.options,
                 "duration": s.duration, "task_kind": s.metadata.get("task_kind")}
                for s in self._samples.values()
            ],
        }

    # ---- sessions
    def _frames_view(self, session: PlaySession, turn: int, refs: list[Any]) -> list[dict[str, Any]]:
        tag = "init" if turn < 0 else str(turn)
        return [{"t": r.t, "masked": r.masked, "url": f"/play-frames/{session.id}/{tag}/{k}.jpg"} for k, r in enumerate(refs)]

    def start(self, body: dict[str, Any]) -> dict[str, Any]:
        """Open a session on `body["sample_id"]`: the env's first observation as the page shows it."""
        from videoseek.envs import DataError, VideoSeekEnv
        from videoseek.viewer.server import BadRequest

        sample = (self._samples or {}).get(body.get("sample_id"))
        if sample is None:
            raise BadRequest(f"sample_id: {body.get('sample_id')!r} is not in {self.samples_path}")
        try:
            env = VideoSeekEnv(sample, self.env_config)
            episode_id = f"{sample.id}/play/{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            obs, info = env.reset(options={"episode_id": episode_id, "policy": POLICY_NAME, "group": {"id": f"play:{sample.id}"}})
        except (DataError, ValueError, OSError) as exc:
            raise BadRequest(f"sample {sample.id}: cannot start the env: {exc}") from None
        session = PlaySession(id=uuid.uuid4().hex[:12], env=env)
        with self._lock:
            self._sessions[session.id] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        traj = env.trajectory
        return {
            "session": session.id, "episode_id": traj.episode_id, "sample_id": sample.id, "question": sample.question,
            "options": sample.options, "problem_type": sample.problem_type.value, "duration": env.duration,
            "has_clues": bool(sample.clue_intervals), "text": obs["text"],  # the intervals themselves: `clues`
            "frames": self._frames_view(session, -1, traj.initial.frames), "max_turns": env.config.max_turns,
            "tools": info["tools"],  # the env's tools (OpenAI function schemas): the page offers these
        }

    def _session(self, session_id: Any) -> PlaySession:
        from videoseek.viewer.server import BadRequest

        with self._lock:
            session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise BadRequest(f"session: {session_id!r} is not an open play session (it may have expired)")
        return session

    def clues(self, body: dict[str, Any]) -> dict[str, Any]:
        """The sample's clue intervals, the answer key, when the player asks to see them ("show clue
        intervals"): the saved trajectory records the turn it was asked at (`metrics.play`)."""
        session = self._session(body.get("session"))
        with session.lock:
            env = session.env
            if not session.done:
                env.trajectory.metrics.setdefault("play", {}).setdefault("clues_shown_at_turn", len(env.trajectory.turns))
            return {"clue_intervals": [list(c) for c in env.sample.clue_intervals]}

    def step(self, body: dict[str, Any]) -> dict[str, Any]:
        """One turn: the page's action as assistant text through `env.step`; saves at the end."""
        from videoseek.viewer.server import BadRequest

        session = self._session(body.get("session"))
        try:
            text = assistant_text(body.get("action"))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        with session.lock:
            if session.done:
                raise BadRequest("this play episode has ended; start a new one")
            env = session.env
            obs, reward, terminated, truncated, info = env.step(text)
            turn = env.trajectory.turns[-1]
            # The evidence state (coverage, score), a span's evidence gain and a box's IoU with the key
            # frames are computed from the answer key (clue intervals, key-frame boxes): they are sent
            # only once the episode has ended.
            ended = terminated or truncated
            call = turn.call.model_dump(exclude=set(ANSWER_KEY_FIELDS)) if turn.call else None
            out: dict[str, Any] = {
                "turn": turn.index, "assistant": text, "text": obs["text"], "error": info["error"],
                "repairs": info["repairs"], "action": info["action"], "call": call,
                "frames": self._frames_view(session, turn.index, turn.observation.frames),
                "calls": self._calls_view(session, answer_key=ended), "terminated": terminated, "truncated": truncated,
            }
            if ended:
                session.done = True
                out.update(reward=reward, reward_components=info.get("reward_components"), clue_intervals=[list(c) for c in env.sample.clue_intervals],
                           prediction=info.get("prediction"), correct=info.get("correct"), answer=env.sample.answer,
                           evidence=info["evidence"], turns_evidence=[{"turn": t.index, **t.evidence} for t in env.trajectory.turns])
                session.saved = self._save(session)
                out["saved"] = session.saved
            return out

    def _calls_view(self, session: PlaySession, answer_key: bool) -> list[dict[str, Any]]:
        """The episode's calls so far as the episode page draws them (`episode.call_records`: spans,
        boxes with the frame to draw them on, labels, rejections); without the answer key's numbers
        (`ANSWER_KEY_FIELDS`) unless `answer_key`."""
        from videoseek.viewer.episode import call_records

        traj = session.env.trajectory
        frames = [self._frames_view(session, t.index, t.observation.frames) for t in traj.turns]
        calls = call_records([t.model_dump() for t in traj.turns], frames, self._frames_view(session, -1, traj.initial.frames))
        if not answer_key:
            for c in calls:
                c.update({k: None for k in ANSWER_KEY_FIELDS if k in c})
        return calls

    def _save(self, session: PlaySession) -> dict[str, Any]:
        """Write the finished episode with the runner's `TrajectoryWriter`; where it went or why not."""
        env = session.env
        try:
            from videoseek.envs.trajectory import TrajectoryWriter

            writer = TrajectoryWriter(self.play_dir)
            # the writer sets FrameRef paths in place; give it a copy so the live session keeps its URLs
            writer.write(env.trajectory.model_copy(deep=True), env.frames_by_turn)
        except Exception as exc:  # noqa: BLE001 - the page must still get the final step's result
            return {"ok": False, "error": f"could not save to {self.play_dir}: {type(exc).__name__}: {exc}"}
        return {"ok": True, "run": "play", "episode_id": env.trajectory.episode_id,
                "path": str(self.play_dir / "trajectories.jsonl")}

    def frame_jpeg(self, session_id: str, turn: str, k: str) -> bytes:
        """JPEG of frame `k` returned at `turn` ("init" for the initial frames) of a session."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise KeyError(session_id)
        try:
            key, idx = (-1 if turn == "init" else int(turn)), int(k)
        except ValueError:
            raise KeyError(turn) from None
        frames = session.env.frames_by_turn.get(key)
        if frames is None or not 0 <= idx < len(frames):
            raise KeyError(f"{turn}/{k}")
        return jpeg_bytes(frames[idx])

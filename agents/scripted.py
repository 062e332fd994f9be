"""Scripted policies: reference points that need no model.

They answer by *looking*: `videoseek.envs.perceive.perceive` reads the pixels of the frames the
episode has received (never the ground truth), so an agent that crops the right span answers
right and one that does not mostly guesses. That makes the gap between `oracle` and `no-tool` a
measure of how much the tasks need seeking.

- `oracle`: crops each clue interval, reasons in Ref-Delta form, answers from what it saw.
- `uniform`: scans the video in fixed windows, then answers from everything it saw.
- `random`: crops 1–3 random spans, then answers.
- `sweep`: scans equal windows in order and answers as soon as the frames show the answer;
  `sweep-shuffled` visits the windows in a random order (wrong first crops, then a correction);
  `sweep-hasty` gives up after two windows and guesses (a teacher that under-uses the tool).
  These are the searchers whose traces teach a model to seek (`make learn`).
- `no-tool`: answers from the sparse initial frames alone.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from videoseek.agents.policy import Message, PolicyInput, PolicyOutput
from videoseek.envs.actions import CropVideo, action_to_text
from videoseek.envs.perceive import perceive
from videoseek.envs.sample import ProblemType, VideoSample
from videoseek.rewards.intervals import union


_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.S)
_ANSWER_BLOCK = re.compile(r"<answer>.*?</answer>", re.S)


def tool_call(start: float, end: float) -> str:
    return action_to_text(CropVideo(round(float(start), 2), round(float(end), 2)))


def seen_frames(messages: list[Message]) -> tuple[np.ndarray | None, np.ndarray]:
    """All frames the episode has received so far (initial and tool turns), with their times."""
    frames = [m.frames for m in messages if m.frames is not None and len(m.frames)]
    times = [m.timestamps for m in messages if m.frames is not None and len(m.frames)]
    if not frames:
        return None, np.zeros(0)
    return np.concatenate(frames), np.concatenate(times)


def guess(sample: VideoSample, rng: np.random.Generator) -> str:
    """A blind guess in the sample's answer format."""
    if sample.options:
        return chr(ord("A") + int(rng.integers(len(sample.options))))
    if sample.problem_type in (ProblemType.numerical, ProblemType.regression):
        return str(int(rng.integers(0, 6)))
    return "unknown"


def reasoning_of(reference: str | None) -> str:
    """The thinking of a reference trace (references may be full responses with think and answer tags)."""
    if not reference:
        return "I have inspected the clue intervals."
    m = _THINK_BLOCK.search(reference)
    body = m.group(1) if m else _ANSWER_BLOCK.sub("", reference)
    return body.strip() or "I have inspected the clue intervals."


def grounded_evidence(sample: VideoSample) -> str:
    """Open-o3-Video style citations of the annotated key-frame objects (the oracle's privilege)."""
    cites = [
        f"<obj>{name}</obj><box>[{', '.join(f'{v:.3f}' for v in box)}]</box>at<t>{kf.time:.1f}</t>s"
        for kf in sample.key_frames
        for name, box in kf.boxes.items()
    ]
    return ("\nGrounded evidence: " + "; ".join(cites) + ".") if cites else ""


def answer_from_frames(inp: PolicyInput, think: str) -> PolicyOutput:
    frames, times = seen_frames(inp.messages)
    answer = perceive(inp.sample, frames, times) if frames is not None else None
    if answer is None:
        answer = guess(inp.sample, inp.rng)
    return PolicyOutput(text=f"<think>{think}</think>\n<answer>{answer}</answer>")


def _calls_made(inp: PolicyInput) -> int:
    return sum(1 for m in inp.messages if m.role == "tool")


class ScriptedPolicy:
    """Base of the scripted policies: one turn per episode, decided by `turn(inp)`."""

    name = "scripted"

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        return [self.turn(inp) for inp in batch]

    def turn(self, inp: PolicyInput) -> PolicyOutput:  # pragma: no cover - abstract
        raise NotImplementedError


class OraclePolicy(ScriptedPolicy):
    """Crops the annotated clue intervals (padded by `pad` seconds), then answers from the frames."""

    name = "oracle"

    def __init__(self, pad: float = 0.25, brief: bool = False) -> None:
        self.pad, self.brief = pad, brief
        if brief:
            self.name = "oracle-brief"

    def turn(self, inp: PolicyInput) -> PolicyOutput:
        duration = inp.evidence.duration
        spans = union((max(0.0, s - self.pad), min(duration, e + self.pad)) for s, e in inp.sample.clue_intervals)
        k = _calls_made(inp)
        if k < len(spans):
            s, e = spans[k]
            if self.brief:  # the searchers' short thoughts (SFT traces)
                why = "The sparse frames do not show it." if k == 0 else "I need the next clue."
            else:
                why = ("The sparse frames do not show the moment the question is about." if k == 0 else "I need the next clue.") + f" I will look at {s:.1f}-{e:.1f}s."
            return PolicyOutput(text=f"<think>{why}</think>\n{tool_call(s, e)}")
        if self.brief:  # one line naming what was seen, as the searchers write (short SFT traces)
            return seen_answer(inp) or answer_from_frames(inp, "I did not see it.")
        return answer_from_frames(inp, reasoning_of(inp.sample.reference_reasoning) + grounded_evidence(inp.sample))


class UniformPolicy(ScriptedPolicy):
    """Scans `windows` equal windows from the start, one crop per turn, then answers."""

    name = "uniform"

    def __init__(self, windows: int = 4) -> None:
        self.windows = windows

    def turn(self, inp: PolicyInput) -> PolicyOutput:
        k, d = _calls_made(inp), inp.evidence.duration
        if k < self.windows:
            s, e = k * d / self.windows, (k + 1) * d / self.windows
            return PolicyOutput(text=f"<think>Scanning window {k + 1} of {self.windows}.</think>\n{tool_call(s, e)}")
        return answer_from_frames(inp, "I scanned the whole video in windows.")


class RandomPolicy(ScriptedPolicy):
    """Crops between 1 and `max_calls` random spans, then answers from what it saw."""

    name = "random"

    def __init__(self, max_calls: int = 3, max_fraction: float = 0.3) -> None:
        self.max_calls, self.max_fraction = max_calls, max_fraction

    def turn(self, inp: PolicyInput) -> PolicyOutput:
        # A stable hash (not hash(), which is salted per process) fixes the episode's call count.
        target = 1 + zlib.crc32(inp.episode_id.encode()) % self.max_calls
        d = inp.evidence.duration
        if _calls_made(inp) < target:
            length = float(inp.rng.uniform(0.05, self.max_fraction)) * d
            s = float(inp.rng.uniform(0, d - length))
            return PolicyOutput(text=f"<think>Random look.</think>\n{tool_call(s, s + length)}")
        return answer_from_frames(inp, "I looked at random spans.")


class SweepPolicy(ScriptedPolicy):
    """Crops `windows` equal windows one per turn until the frames seen answer, then answers.

    `shuffled=True` visits the windows in a random order fixed per episode (a stable hash of the
    episode id), so most of its first crops miss and later ones correct them. The thinking names
    what was seen as the option text, so a trace ties the pixels to the answer it gives.
    `give_up_after=k` stops looking after k windows that did not show it and guesses.
    """

    name = "sweep"

    def __init__(self, windows: int = 4, shuffled: bool = False, give_up_after: int | None = None) -> None:
        self.windows, self.shuffled = windows, shuffled
        self.give_up_after = windows if give_up_after is None else min(windows, give_up_after)
        if shuffled:
            self.name = "sweep-shuffled"
        elif give_up_after is not None:
            self.name = "sweep-hasty"

    def turn(self, inp: PolicyInput) -> PolicyOutput:
        answered = seen_answer(inp)
        if answered is not None:
            return answered
        k, d = _calls_made(inp), inp.evidence.duration
        if k >= self.give_up_after:
            return PolicyOutput(text=f"<think>I did not see it anywhere.</think>\n<answer>{guess(inp.sample, inp.rng)}</answer>")
        order = np.random.default_rng(zlib.crc32(inp.episode_id.encode())).permutation(self.windows) if self.shuffled else range(self.windows)
        w = list(order)[k]
        why = "The sparse frames do not show it." if k == 0 else "Not in that window."
        return PolicyOutput(text=f"<think>{why}</think>\n{tool_call(w * d / self.windows, (w + 1) * d / self.windows)}")


def seen_answer(inp: PolicyInput) -> PolicyOutput | None:
    """The answer turn when the frames seen so far answer the question (None when they do not)."""
    frames, times = seen_frames(inp.messages)
    answer = perceive(inp.sample, frames, times) if frames is not None else None
    if answer is None:
        return None
    return PolicyOutput(text=f"<think>I can see it now: {option_text(inp.sample, answer)}.</think>\n<answer>{answer}</answer>")


def option_text(sample: VideoSample, answer: str) -> str:
    """The text of the option `answer` names ("green" for "C" of "C. green"), else the answer itself."""
    for option in sample.options or []:
        letter, _, text = option.partition(".")
        if letter.strip() == answer and text.strip():
            return text.strip()
    return answer


class NoToolPolicy(ScriptedPolicy):
    """Answers at once from the sparse initial frames."""

    name = "no-tool"

    def turn(self, inp: PolicyInput) -> PolicyOutput:
        return answer_from_frames(inp, "I answer from the initial frames.")


SCRIPTED = {
    "oracle": OraclePolicy,
    "oracle-brief": lambda: OraclePolicy(brief=True),
    "uniform": UniformPolicy,
    "random": RandomPolicy,
    "sweep": SweepPolicy,
    "sweep-shuffled": lambda: SweepPolicy(shuffled=True),
    "sweep-hasty": lambda: SweepPolicy(give_up_after=2),
    "no-tool": NoToolPolicy,
}

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

The `small_text` task (`videoseek.envs.synth.ZOOM_KINDS`) prints its answer too small to read in
the env's frames: the oracle crops the clue span, then, when the env offers `zoom`, zooms on the
sign and reads the character from the zoomed pixels (`read_label`, template matching against the
glyphs of the options in the synth's font). With crops alone it reads the crop's frames, where the
character is a smudge of 2-3 px, and so guesses.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from videoseek.agents.policy import Message, PolicyInput, PolicyOutput
from videoseek.envs.actions import CropVideo, action_to_text, parse_action
from videoseek.envs.perceive import option_texts, perceive
from videoseek.envs.sample import ProblemType, VideoSample
from videoseek.envs.synth import ZOOM_KINDS, render_glyph
from videoseek.envs.tools import ZoomTool
from videoseek.rewards.intervals import union
from videoseek.rewards.tags import first_block, remove_blocks




def tool_call(start: float, end: float) -> str:
    return action_to_text(CropVideo(round(float(start), 2), round(float(end), 2)))


def zoom_call(time: float, box: Sequence[float]) -> str:
    return ZoomTool.call_text({"time": round(float(time), 3), "box": [round(float(v), 4) for v in box]})


def offered_tools(tools: Sequence[Any] | None) -> set[str] | None:
    """Names of the tools the env offers (`PolicyInput.tools`: its OpenAI schemas, or names);
    None when the policy was not told (a runner that predates tool lists)."""
    if tools is None:
        return None
    names = set()
    for t in tools:
        if isinstance(t, str):
            names.add(t)
        elif isinstance(t, Mapping):
            names.add(str((t.get("function") or t).get("name")))
    return names


def tool_results(messages: list[Message]) -> list[tuple[str | None, Message]]:
    """Each tool message with the name of the tool the assistant turn before it called (None when
    that turn's call did not parse)."""
    out = []
    for prev, m in zip(messages, messages[1:]):
        if m.role == "tool":
            act = parse_action(prev.text).action if prev.role == "assistant" else None
            out.append((getattr(act, "name", None), m))
    return out


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
    body = first_block(reference, "think")
    if body is None:
        body = remove_blocks(reference, "answer")
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


# ---- reading a sign's character from pixels (small_text) -----------------------------------------
# The shortest glyph the reader accepts, in pixels of the image it reads: 5x7 is the smallest grid
# that draws capitals and digits apart, so below 6 px tall a character is a smudge, not text.
LEGIBLE_PX = 6
MIN_CONTRAST = 60  # grey levels between the sign and its darkest ink; less is no print at all


def sign_ink(region: np.ndarray) -> np.ndarray | None:
    """The ink of the character on a light sign that fills `region` (uint8 (H, W, 3)): darkness
    relative to the sign in [0, 1], tight to the character; None when there is no sign or no ink.

    The sign is the rows and columns that are mostly as bright as its brightest tenth; a margin of
    a twentieth is dropped on each side, so the background a box may catch at its edges is no ink.
    """
    g = np.asarray(region, dtype=np.float32)
    if g.ndim != 3 or g.size == 0:
        return None
    g = g.mean(axis=-1)
    plate = float(np.percentile(g, 90))
    bright = g >= plate - 40
    rows, cols = np.flatnonzero(bright.mean(axis=1) > 0.5), np.flatnonzero(bright.mean(axis=0) > 0.5)
    if len(rows) < 3 or len(cols) < 3:
        return None
    my, mx = 1 + (rows[-1] - rows[0]) // 20, 1 + (cols[-1] - cols[0]) // 20
    inner = g[rows[0] + my : rows[-1] + 1 - my, cols[0] + mx : cols[-1] + 1 - mx]
    if inner.size == 0:
        return None
    ink = np.clip(plate - inner, 0, None)
    if float(ink.max()) < MIN_CONTRAST:
        return None
    ys, xs = np.nonzero(ink > 0.5 * ink.max())
    return ink[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1] / float(ink.max())


def _ncc(a: np.ndarray, b: np.ndarray) -> float:
    """Normalised cross-correlation of two ink patches, centred on a canvas that holds both (so a
    narrow glyph does not match a wide one)."""
    h, w = max(a.shape[0], b.shape[0]), max(a.shape[1], b.shape[1])

    def centred(x: np.ndarray) -> np.ndarray:
        out = np.zeros((h, w), np.float32)
        y0, x0 = (h - x.shape[0]) // 2, (w - x.shape[1]) // 2
        out[y0 : y0 + x.shape[0], x0 : x0 + x.shape[1]] = x
        out -= out.mean()
        n = float(np.linalg.norm(out))
        return out / n if n > 0 else out

    return float((centred(a) * centred(b)).sum())


def _glyphs(char: str, height: int) -> list[np.ndarray]:
    """Templates of `char` `height` px tall: the synth's font at every size that prints it within a
    pixel of that height (small sizes are hinted, not scaled), and a large print scaled to it.
    (Its capitals and digits are 0.62-0.8 of the font size tall, which bounds the sizes tried.)"""
    sizes = range(max(4, int((height - 1) / 0.85)), int((height + 1) / 0.6) + 2)
    out = [t for t in (render_glyph(char, size) for size in sizes) if abs(t.shape[0] - height) <= 1]
    big = render_glyph(char, 96)
    width = max(1, round(big.shape[1] * height / big.shape[0]))
    out.append(np.asarray(Image.fromarray(np.asarray(big)).resize((width, height), Image.BILINEAR), dtype=np.float32))
    return out


def read_character(region: np.ndarray, chars: Sequence[str], min_height: int = LEGIBLE_PX) -> str | None:
    """Which of `chars` the sign filling `region` shows, by template matching; None when the region
    holds no sign with ink, or its character is under `min_height` px tall (illegible)."""
    ink = sign_ink(region)
    if ink is None or ink.shape[0] < min_height or not chars:
        return None
    scores = [max(_ncc(ink, t) for t in _glyphs(c, ink.shape[0])) for c in chars]
    return chars[int(np.argmax(scores))]


def read_label(region: np.ndarray, options: Sequence[str] | None, min_height: int = LEGIBLE_PX) -> str | None:
    """The option letter of the character the sign in `region` shows (options "A. 7", ...), or None."""
    texts = option_texts(options)
    if not texts or any(len(t) != 1 for t in texts):
        return None
    got = read_character(region, texts, min_height)
    return None if got is None else "ABCDEFGH"[texts.index(got)]


def cut_box(frame: np.ndarray, box: Sequence[float]) -> np.ndarray:
    """The region [x1, y1, x2, y2] (fractions) of a frame, at least one pixel."""
    h, w = frame.shape[:2]
    x1, y1, x2, y2 = (min(max(float(v), 0.0), 1.0) for v in box)
    left, top = min(int(round(x1 * w)), w - 1), min(int(round(y1 * h)), h - 1)
    return frame[top : max(int(round(y2 * h)), top + 1), left : max(int(round(x2 * w)), left + 1)]


def needs_zoom(sample: VideoSample) -> bool:
    """The task's answer is too small to read without `zoom` (`synth.ZOOM_KINDS`)."""
    return (sample.metadata or {}).get("task_kind") in ZOOM_KINDS


def sign_looks(sample: VideoSample) -> list[tuple[float, list[float]]]:
    """(time, box) of every annotated key-frame box: where the oracle zooms (its privilege)."""
    return [(kf.time, list(box)) for kf in sample.key_frames for box in kf.boxes.values()]


def label_reading(inp: PolicyInput) -> tuple[str | None, float | None]:
    """(option letter, time) read from the frames the episode received, None when unreadable.

    Zoomed frames are read whole (a zoom on the sign returns just the sign). Failing those, the
    sign's box is cut from each ordinary frame inside a clue span and read: at the env's pixel
    budget its character is a few pixels tall and the reader refuses it.
    """
    results = tool_results(inp.messages)
    zoomed = [(f, t) for name, m in results if name == ZoomTool.name and m.num_frames for f, t in zip(m.frames, m.timestamps)]
    for frame, t in zoomed:
        got = read_label(frame, inp.sample.options)
        if got is not None:
            return got, float(t)
    zoomed_ids = {id(m) for name, m in results if name == ZoomTool.name}
    boxes = [box for _, box in sign_looks(inp.sample)]
    for m in inp.messages:
        if m.role == "assistant" or not m.num_frames or id(m) in zoomed_ids:
            continue
        for frame, t in zip(m.frames, m.timestamps):
            if any(s <= t <= e for s, e in inp.sample.clue_intervals):
                for box in boxes:
                    got = read_label(cut_box(frame, box), inp.sample.options)
                    if got is not None:
                        return got, float(t)
    return None, None


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
        if needs_zoom(inp.sample):
            return self._small_text(inp, k - len(spans))
        if self.brief:  # one line naming what was seen, as the searchers write (short SFT traces)
            return seen_answer(inp) or answer_from_frames(inp, "I did not see it.")
        return answer_from_frames(inp, reasoning_of(inp.sample.reference_reasoning) + grounded_evidence(inp.sample))

    def _small_text(self, inp: PolicyInput, zooms_made: int) -> PolicyOutput:
        """After the crops: zoom on each annotated sign box (when the env offers zoom), then answer
        with the character read from the pixels, or guess when none could be read."""
        offered = offered_tools(inp.tools)
        looks = sign_looks(inp.sample) if offered is not None and ZoomTool.name in offered else []
        if zooms_made < len(looks):
            t, box = looks[zooms_made]
            why = "The character on the sign is too small to read in these frames." + ("" if self.brief else f" I will zoom into the sign at {t:.1f}s.")
            return PolicyOutput(text=f"<think>{why}</think>\n{zoom_call(t, box)}")
        letter, t = label_reading(inp)
        if letter is None:
            why = "I cannot read the character on the sign at this resolution."
            return PolicyOutput(text=f"<think>{why}</think>\n<answer>{guess(inp.sample, inp.rng)}</answer>")
        char = option_text(inp.sample, letter)
        if self.brief:
            think = f"I can see it now: {char}."
        else:
            think = f"The sign at {t:.1f}s, seen at full resolution, shows the character {char}, which is option {letter}." + grounded_evidence(inp.sample)
        return PolicyOutput(text=f"<think>{think}</think>\n<answer>{letter}</answer>")


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
        return search_turn(k, w * d / self.windows, (w + 1) * d / self.windows)


def search_turn(k: int, start: float, end: float) -> PolicyOutput:
    """The searchers' crop turn: the `k`-th look (0: the first, after the sparse frames) at (start, end)."""
    why = "The sparse frames do not show it." if k == 0 else "Not in that window."
    return PolicyOutput(text=f"<think>{why}</think>\n{tool_call(start, end)}")


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

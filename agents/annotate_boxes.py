"""`videoseek annotate-boxes`: propagate object boxes over the clue frames with SAM2's video predictor.

Open-o3-Video-v2 (seed 003, "Data Construction" step 2) annotates the question-relevant objects on
clue frames with a segmentation tracker; this command does the same with SAM2 (optional extra
``annotate``): given a prompt box or point for an object on one frame, SAM2 tracks its mask forward
and backward over the frames of the sample's clue intervals, and each mask's bounding box is
written, normalised, into ``key_frames`` (a new key frame per tracked frame, or the object added to
the key frame already at that time).

Prompts: by default every object with a box in the sample's ``key_frames`` is prompted with its
first box; ``--prompts FILE`` gives explicit ones, one JSON object per line:
``{"id": SAMPLE_ID, "object": NAME, "time": SECONDS, "box": [x1, y1, x2, y2]}`` or with
``"points": [[x, y], ...], "labels": [1, 0, ...]`` (normalised coordinates; label 1 = on the object).
Boxes already annotated for an object are kept; only frames without one are filled.

Memory: only the selected frames are decoded and given to SAM2 (at most ``--fps`` per second of
clue, at most ``--max-frames`` per sample, at most ``--max-pixels`` each), never the whole video: a
long video at full size exhausts memory (a 600-frame clip peaked at 18 GB on CPU). SAM2's public
video predictor reads a folder of JPEGs, so the selected frames are written to a temporary folder.

PyPI's ``sam2`` 1.1.0 is a third-party repackage of Meta's code; install it without build
isolation so it builds against the installed torch:
``SAM2_BUILD_CUDA=0 pip install --no-build-isolation sam2==1.1.0``. Checkpoints load from a local
path (``--checkpoint``); ``--random-weights`` builds the architecture untrained (for tests).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from videoseek.envs.sample import DataError, KeyFrame, VideoSample
from videoseek.envs.video import BACKENDS, DEFAULT_BACKEND

DEFAULT_CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"
SAM2_INSTALL = "SAM2_BUILD_CUDA=0 pip install --no-build-isolation sam2==1.1.0"


@dataclass(frozen=True)
class Prompt:
    """An object to track: a normalised box, or normalised points with labels (1 on, 0 off)."""

    object: str
    time: float
    box: tuple[float, float, float, float] | None = None
    points: tuple[tuple[float, float], ...] = ()
    labels: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.box is None and not self.points:
            raise ValueError(f"prompt for {self.object!r} needs a box or points")
        if self.points and len(self.points) != len(self.labels):
            raise ValueError(f"prompt for {self.object!r}: {len(self.points)} points but {len(self.labels)} labels")
        coords = list(self.box or ()) + [c for p in self.points for c in p]
        if not all(math.isfinite(c) and 0 <= c <= 1 for c in coords):
            raise ValueError(f"prompt for {self.object!r}: coordinates must be normalised to [0, 1]")
        if self.box is not None and not (self.box[0] < self.box[2] and self.box[1] < self.box[3]):
            raise ValueError(f"prompt for {self.object!r}: box needs x1 < x2 and y1 < y2, got {list(self.box)}")


# ---- pure helpers ------------------------------------------------------------------------------
def prompts_from_key_frames(sample: VideoSample) -> list[Prompt]:
    """One box prompt per object: its first box in time order."""
    seen: dict[str, Prompt] = {}
    for kf in sorted(sample.key_frames, key=lambda k: k.time):
        for name, box in kf.boxes.items():
            if name not in seen and box[0] < box[2] and box[1] < box[3]:
                seen[name] = Prompt(name, kf.time, box=tuple(box))
    return list(seen.values())


def read_prompts(path: str | os.PathLike[str]) -> dict[str, list[Prompt]]:
    """Prompts by sample id from a JSONL file; a bad line is a `DataError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: prompts file not found")
    out: dict[str, list[Prompt]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            prompt = Prompt(
                object=str(row["object"]),
                time=float(row["time"]),
                box=tuple(float(v) for v in row["box"]) if row.get("box") is not None else None,
                points=tuple(tuple(float(c) for c in p) for p in row.get("points") or ()),
                labels=tuple(int(v) for v in row.get("labels") or ()),
            )
            if prompt.box is not None and len(prompt.box) != 4:
                raise ValueError("box needs 4 numbers")
            out.setdefault(str(row["id"]), []).append(prompt)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
        except KeyError as exc:
            raise DataError(f"{path}:{lineno}: field {exc.args[0]!r} missing") from None
        except (TypeError, ValueError) as exc:
            raise DataError(f"{path}:{lineno}: {exc}") from None
    return out


def select_frames(
    frame_times: np.ndarray,
    clue_intervals: Sequence[tuple[float, float]],
    prompt_times: Sequence[float],
    fps: float = 2.0,
    max_frames: int = 32,
) -> np.ndarray:
    """Indices of the frames to track over: for each clue interval, the frames nearest a grid of
    `fps` per second (at least its first and last frame), plus the frame nearest each prompt.
    More than `max_frames` are thinned evenly, keeping the prompt frames.

    >>> select_frames(np.arange(50) / 10, [(1.0, 2.0)], [3.0], fps=2).tolist()
    [10, 15, 20, 30]
    """
    frame_times = np.asarray(frame_times, dtype=np.float64)

    def nearest(t: float) -> int:
        return int(np.abs(frame_times - t).argmin())

    picked: set[int] = set()
    for s, e in clue_intervals:
        inside = np.flatnonzero((frame_times >= s) & (frame_times <= e))
        if len(inside) == 0:  # a clue shorter than a frame: its nearest frame
            picked.add(nearest((s + e) / 2))
            continue
        grid = np.arange(s, e, 1.0 / fps) if fps > 0 else np.array([s])
        picked.update(int(inside[np.abs(frame_times[inside] - t).argmin()]) for t in grid)
        picked.update((int(inside[0]), int(inside[-1])))
    prompts = {nearest(t) for t in prompt_times}
    rest = sorted(picked - prompts)
    room = max(0, max_frames - len(prompts))
    if len(rest) > room:
        rest = [rest[int(k)] for k in np.linspace(0, len(rest) - 1, room).round()] if room else []
    return np.array(sorted(prompts | set(rest)), dtype=int)


def mask_to_box(mask: np.ndarray) -> list[float] | None:
    """Normalised [x1, y1, x2, y2] of a boolean (H, W) mask (pixel edges); None when empty.

    >>> m = np.zeros((4, 8), bool); m[1:3, 2:6] = True
    >>> mask_to_box(m)
    [0.25, 0.25, 0.75, 0.75]
    """
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    h, w = mask.shape
    return [float(xs.min()) / w, float(ys.min()) / h, float(xs.max() + 1) / w, float(ys.max() + 1) / h]


def merge_boxes(sample: VideoSample, tracked: dict[float, dict[str, list[float]]], same_time: float) -> tuple[VideoSample, int]:
    """`sample` with the tracked boxes added to its key frames; existing boxes win.

    A tracked time within `same_time` seconds of a key frame joins it; otherwise it becomes a new
    key frame. Returns the new sample and how many boxes were added.
    """
    frames = [KeyFrame(time=k.time, boxes=dict(k.boxes)) for k in sample.key_frames]
    added = 0
    for t, boxes in sorted(tracked.items()):
        target = min(frames, key=lambda k: abs(k.time - t), default=None)
        if target is None or abs(target.time - t) > same_time:
            target = KeyFrame(time=t)
            frames.append(target)
        for name, box in boxes.items():
            if name not in target.boxes:
                target.boxes[name] = box
                added += 1
    frames.sort(key=lambda k: k.time)
    return sample.model_copy(update={"key_frames": frames}), added


# ---- SAM2 ----------------------------------------------------------------------------------------
def build_predictor(config: str = DEFAULT_CONFIG, checkpoint: str | None = None, device: str = "cpu", image_size: int | None = None):
    """SAM2's video predictor from its packaged `config`; weights from a local `checkpoint`
    (None: random weights). `image_size` overrides the model's input size (smaller is faster)."""
    try:
        from sam2.build_sam import build_sam2_video_predictor
    except ImportError:
        raise DataError(f"annotate-boxes needs SAM2 (the optional extra 'annotate'): {SAM2_INSTALL}") from None
    if checkpoint is not None and not Path(checkpoint).is_file():
        raise DataError(f"{checkpoint}: SAM2 checkpoint not found (hub downloads are not used; give a local .pt file)")
    overrides = [f"++model.image_size={int(image_size)}"] if image_size else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return build_sam2_video_predictor(config, ckpt_path=checkpoint, device=device, hydra_overrides_extra=overrides)


def track(predictor: Any, frames: np.ndarray, prompts: Sequence[tuple[int, int, Prompt]]) -> dict[int, dict[int, np.ndarray]]:
    """Masks per frame index and object id: `prompts` are (frame index, object id, prompt);
    tracking runs forward and backward from the earliest prompted frame (SAM2 conditions every
    later frame on all prompted ones)."""
    import torch

    h, w = frames.shape[1:3]
    scale = np.array([w, h], dtype=np.float32)
    masks: dict[int, dict[int, np.ndarray]] = {}
    with tempfile.TemporaryDirectory(prefix="videoseek-sam2-") as folder:
        for i, frame in enumerate(frames):
            Image.fromarray(frame).save(os.path.join(folder, f"{i:05d}.jpg"), quality=95)
        # SAM2 prints a tqdm bar per call and warns that its optional C extension (hole filling)
        # is missing; both would garble our own progress bar, so its stderr goes to /dev/null.
        with torch.inference_mode(), warnings.catch_warnings(), open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):
            warnings.simplefilter("ignore", UserWarning)
            state = predictor.init_state(video_path=folder, offload_video_to_cpu=True)
            for idx, obj_id, p in prompts:
                kwargs: dict[str, Any] = {}
                if p.box is not None:
                    kwargs["box"] = np.asarray(p.box, np.float32) * np.tile(scale, 2)
                if p.points:
                    kwargs["points"] = np.asarray(p.points, np.float32) * scale
                    kwargs["labels"] = np.asarray(p.labels, np.int32)
                predictor.add_new_points_or_box(state, frame_idx=idx, obj_id=obj_id, **kwargs)
            start = min(idx for idx, _, _ in prompts)
            for reverse in (False, True):
                for fi, obj_ids, logits in predictor.propagate_in_video(state, start_frame_idx=start, reverse=reverse):
                    for oid, lg in zip(obj_ids, logits):
                        masks.setdefault(int(fi), {})[int(oid)] = (lg[0] > 0).cpu().numpy()
            predictor.reset_state(state)
    return masks


@dataclass
class BoxStats:
    samples: int = 0
    boxes: int = 0
    frames: int = 0
    skipped: Counter = field(default_factory=Counter)


def annotate_sample(
    sample: VideoSample,
    predictor: Any,
    prompts: Sequence[Prompt],
    *,
    fps: float = 2.0,
    max_frames: int = 32,
    max_pixels: int | None = 1024 * 768,
    backend: str = DEFAULT_BACKEND,
) -> tuple[VideoSample, int, int]:
    """Track `prompts` over the clue frames of `sample`; returns (sample, boxes added, frames)."""
    from videoseek.envs.video import open_video

    reader = open_video(sample.video, backend)
    idx = select_frames(reader.frame_times, sample.clue_intervals, [p.time for p in prompts], fps, max_frames)
    frames, times = reader.frames_by_index(idx, max_pixels=max_pixels)
    frames = np.ascontiguousarray(frames)

    def nearest(t: float) -> int:
        return int(np.abs(times - t).argmin())

    placed = [(nearest(p.time), k, p) for k, p in enumerate(prompts)]
    masks = track(predictor, frames, placed)
    prompted = {(fi, k) for fi, k, _ in placed}
    tracked: dict[float, dict[str, list[float]]] = {}
    for fi, per_obj in masks.items():
        for k, mask in per_obj.items():
            box = mask_to_box(mask)
            if box is not None and (fi, k) not in prompted:  # the prompt frame keeps its given box
                tracked.setdefault(float(times[fi]), {})[prompts[k].object] = box
    for fi, k, p in placed:
        if p.box is not None:
            tracked.setdefault(float(times[fi]), {})[p.object] = list(p.box)
    # The frame nearest a key frame's time is at most half a frame away (plus float noise).
    half_frame = (0.5 / reader.fps if reader.fps > 0 else 0.05) + 1e-6
    out, added = merge_boxes(sample, tracked, same_time=half_frame)
    return out, added, len(idx)


def annotate_samples(
    samples: Sequence[VideoSample],
    predictor: Any,
    prompts: dict[str, list[Prompt]] | None = None,
    *,
    on_sample: Callable[[VideoSample], None] | None = None,
    progress: bool = False,
    **kwargs: Any,
) -> BoxStats:
    """Annotate each sample (explicit `prompts` by id, else its key-frame boxes); every sample is
    passed to `on_sample`, unchanged when it has no prompt or no clue interval."""
    stats = BoxStats()
    it: Any = samples
    if progress:
        from tqdm import tqdm

        it = tqdm(samples, desc="annotate-boxes", unit="sample")
    for s in it:
        ps = (prompts or {}).get(s.id) if prompts is not None else prompts_from_key_frames(s)
        if not ps:
            stats.skipped["no prompt"] += 1
        elif not s.clue_intervals:
            stats.skipped["no clue interval"] += 1
        else:
            s, added, n = annotate_sample(s, predictor, ps, **kwargs)
            stats.boxes += added
            stats.frames += n
        stats.samples += 1
        if on_sample:
            on_sample(s)
    return stats


# ---- CLI ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="samples.jsonl")
    parser.add_argument("--out", required=True, help="samples.jsonl with the propagated boxes (written sample by sample)")
    parser.add_argument("--checkpoint", default=None, help="local SAM2 checkpoint (.pt) matching --config")
    parser.add_argument("--random-weights", action="store_true", help="no checkpoint: untrained SAM2 (tests, smoke runs)")
    parser.add_argument("--config", default=DEFAULT_CONFIG, help=f"SAM2 config packaged with sam2 (default {DEFAULT_CONFIG})")
    parser.add_argument("--image-size", type=int, default=None, help="SAM2 input size override (default: the config's, 1024)")
    parser.add_argument("--prompts", default=None, help="JSONL of prompts {id, object, time, box | points+labels}; default: key-frame boxes")
    parser.add_argument("--fps", type=float, default=2.0, help="frames per second of clue interval to track over (default 2)")
    parser.add_argument("--max-frames", type=int, default=32, help="frames per sample at most (default 32)")
    parser.add_argument("--max-pixels", type=int, default=1024 * 768, help="decode frames at most this many pixels (default 1024x768)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help=f"video decoder (default {DEFAULT_BACKEND})")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run: samples already in --out are skipped")
    parser.add_argument("--overwrite", action="store_true", help="start --out again")
    parser.add_argument("--limit", type=int, default=None, help="annotate at most this many (more) samples")


def run(args: argparse.Namespace) -> int:
    from videoseek.agents.annotate_masks import open_output, pending_samples, row_writer
    from videoseek.envs.errors import UserError

    if args.checkpoint is None and not args.random_weights:
        raise UserError("give --checkpoint PATH (a local SAM2 .pt file), or --random-weights for an untrained model")
    if args.fps <= 0 or args.max_frames < 1:
        raise UserError("--fps must be > 0 and --max-frames >= 1")
    samples = VideoSample.from_jsonl(args.dataset)
    prompts = read_prompts(args.prompts) if args.prompts else None
    predictor = build_predictor(args.config, args.checkpoint, args.device, args.image_size)
    fh, already = open_output(args.out, args.resume, args.overwrite)
    todo = pending_samples(samples, already, args.limit)
    try:
        stats = annotate_samples(
            todo, predictor, prompts, on_sample=row_writer(fh, args.out), progress=True,
            fps=args.fps, max_frames=args.max_frames, max_pixels=args.max_pixels, backend=args.backend,
        )  # fmt: skip
    finally:
        fh.close()
    skipped = ", ".join(f"{n} {why}" for why, n in stats.skipped.items()) or "none"
    print(f"annotated {stats.samples} samples ({len(already)} already done): {stats.boxes} boxes added over "
          f"{stats.frames} frames; unchanged: {skipped} -> {args.out}", file=sys.stdout)
    return 0

#!/usr/bin/env python
"""Reader probe: do a checkpoint's vision features tell a data set's answers apart?

    python training/reader_probe.py --model runs/learn/base_model runs/learn/sft/checkpoint \
        --data runs/learn/data/train/samples.jsonl --window quarter

When a policy reads some answers wrong where its frames show the clue (`envs.metrics.reading_by_answer`),
this says whether the information was in the features it was given. For each multiple-choice
sample the env crops a window around its first clue interval (`--window clue`: the interval itself,
every frame shows the clue; `quarter`: the quarter of the video holding the clue's middle, as a
policy's quarter-window crop shows it, often in one or two of its frames), the model's vision tower
encodes the crop's frames as a video, and the tokens are mean-pooled at `--layer`:

- `tower`: the input of the tower's merger, the output of the blocks that `--freeze-vision` and
  `actor.freeze_vision_tower` keep at their initial weights (the same for a base model and its SFT);
- `merger`: the merger's output, the embeddings the language model reads (the merger trains).

A multinomial logistic regression (standardised features, L2 1e-2, L-BFGS) predicts the answer
letter in 5 folds; it prints the held-out accuracy and confusion matrix per model, and the pair of
answers a nearest-centroid rule (leave-one-out) separates worst. A probe near 1.0 where the policy
reads an answer wrong says the loss is learned, not a limit of the features. Written by hand rather
than with scikit-learn (not a dependency here): the logistic regression is 10 lines of torch.

`--out FILE.json` keeps every number. CPU, about 1 s per sample and model on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from videoseek.agents.prompting import frames_metadata
from videoseek.envs import CropVideo, EnvConfig, VideoSample, VideoSeekEnv
from videoseek.training.local_backend.vision_cache import vision_tower


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", nargs="+", required=True, help="checkpoint folders (a tiny model, an SFT or GRPO checkpoint)")
    p.add_argument("--data", required=True, help="samples.jsonl (multiple-choice samples with clue intervals)")
    p.add_argument("--n", type=int, default=100, help="samples used, from the start (default 100)")
    p.add_argument("--window", choices=("clue", "quarter"), default="quarter", help="what the crop covers (default quarter)")
    p.add_argument("--layer", choices=("tower", "merger"), default="tower", help="where the tokens are pooled (default tower)")
    p.add_argument("--frames", type=int, default=4, help="frames per crop (default 4, make learn's frames_per_call)")
    p.add_argument("--max-pixels", type=int, default=12544, help="frame size (default 12544, make learn's 112 x 112)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--out", default=None, help="write every number to this JSON file")
    return p.parse_args(argv)


def crop_window(sample: VideoSample, window: str) -> tuple[float, float]:
    """The crop of `sample`'s first clue interval: the interval, or the quarter of the video holding its middle."""
    start, end = sample.clue_intervals[0]
    if window == "clue":
        return float(start), float(end)
    quarter = sample.duration / 4
    k = min(3, int((start + end) / 2 // quarter))
    return k * quarter, (k + 1) * quarter


def crop_frames(sample: VideoSample, window: str, config: EnvConfig) -> tuple[np.ndarray, np.ndarray]:
    """The frames and times the env returns for the crop (decoded and resized by the env itself)."""
    env = VideoSeekEnv(sample, config)
    env.reset(seed=0)
    start, end = crop_window(sample, window)
    obs, *_ = env.step(CropVideo(start, end))
    if obs["frames"] is None or len(obs["frames"]) == 0:
        raise ValueError(f"{sample.id}: the crop ({start}, {end}) returned no frames: {obs['text']}")
    return obs["frames"], obs["timestamps"]


def pooled_features(model: Any, processor: Any, frames: np.ndarray, times: np.ndarray, layer: str) -> np.ndarray:
    """The mean over tokens of the vision tower's merger input (`tower`) or output (`merger`)."""
    visual = vision_tower(model)
    caught: dict[str, torch.Tensor] = {}
    hook = (visual.merger.register_forward_pre_hook(lambda _m, args: caught.__setitem__("x", args[0])) if layer == "tower"
            else visual.merger.register_forward_hook(lambda _m, _args, out: caught.__setitem__("x", out)))  # fmt: skip
    try:
        video = processor.video_processor(videos=[frames], video_metadata=[frames_metadata(times)], do_sample_frames=False, return_tensors="pt")
        with torch.no_grad():
            visual(video["pixel_values_videos"], grid_thw=video["video_grid_thw"])
    finally:
        hook.remove()
    return caught["x"].float().mean(0).numpy()


def linear_probe(features: np.ndarray, labels: list[str], folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Held-out accuracy and confusion matrix of a multinomial logistic regression in `folds` folds."""
    classes = sorted(set(labels))
    y = np.array([classes.index(a) for a in labels])
    x = ((features - features.mean(0)) / (features.std(0) + 1e-6)).astype(np.float64)
    order = np.random.default_rng(seed).permutation(len(y))
    predicted = np.zeros(len(y), dtype=int)
    for fold in range(folds):
        test = order[fold::folds]
        train = np.setdiff1d(order, test)
        torch.manual_seed(seed)
        linear = torch.nn.Linear(x.shape[1], len(classes), dtype=torch.float64)
        xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
        opt = torch.optim.LBFGS(linear.parameters(), max_iter=200)

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(linear(xt), yt) + 1e-2 * linear.weight.pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            predicted[test] = linear(torch.from_numpy(x[test])).argmax(1).numpy()
    confusion = np.zeros((len(classes), len(classes)), dtype=int)
    np.add.at(confusion, (y, predicted), 1)
    return {"accuracy": float((predicted == y).mean()), "classes": classes, "confusion": confusion.tolist()}


def centroid_pairs(features: np.ndarray, labels: list[str]) -> dict[str, float]:
    """Per pair of answers, the leave-one-out accuracy of the nearer class centroid (Euclidean)."""
    y = np.array(labels)
    out = {}
    for a, b in itertools.combinations(sorted(set(labels)), 2):
        keep = (y == a) | (y == b)
        x, yy = features[keep], y[keep]
        right = 0
        for i in range(len(yy)):
            others = np.arange(len(yy)) != i
            near_a = np.linalg.norm(x[i] - x[others & (yy == a)].mean(0)) < np.linalg.norm(x[i] - x[others & (yy == b)].mean(0))
            right += (a if near_a else b) == yy[i]
        out[f"{a}/{b}"] = right / len(yy)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from transformers import AutoModelForImageTextToText, AutoProcessor

    samples = [s for s in VideoSample.from_jsonl(args.data) if s.problem_type == "multiple_choice" and s.clue_intervals][: args.n]
    if len(samples) < 2 * args.folds:
        raise SystemExit(f"reader_probe: {args.data}: {len(samples)} multiple-choice samples with clue intervals; need {2 * args.folds}")
    config = EnvConfig(initial_frames=4, frames_per_call=args.frames, max_pixels=args.max_pixels, max_turns=2)
    crops = [crop_frames(s, args.window, config) for s in samples]
    labels = [s.answer for s in samples]
    results: dict[str, Any] = {"data": args.data, "n": len(samples), "window": args.window, "layer": args.layer, "models": {}}
    for path in args.model:
        model = AutoModelForImageTextToText.from_pretrained(path).eval()
        processor = AutoProcessor.from_pretrained(path)
        features = np.stack([pooled_features(model, processor, f, t, args.layer) for f, t in crops])
        probe = linear_probe(features, labels, args.folds)
        pairs = centroid_pairs(features, labels)
        worst = min(pairs, key=pairs.get)
        results["models"][path] = {**probe, "centroid_pairs": pairs, "worst_pair": worst}
        print(f"{path}: probe accuracy {probe['accuracy']:.3f} ({args.window} crops, {args.layer}); worst pair {worst} {pairs[worst]:.2f}")
        print("  confusion (rows: answer " + " ".join(probe["classes"]) + "): " + str(probe["confusion"]))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

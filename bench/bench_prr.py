"""Benchmark: Process Reasoning Reward (MOSS-ChatV) on a 20-generated × 8-reference-step trace.

Compares `videoseek.rewards.process_reward` with the way public code computes PRR today: the
`rouge-score` package called once per (generated, reference) step pair, a cost matrix of Python
lists and a pure-Python subsequence DTW (Algorithm 2). Both run in this process on the same
traces; the values must agree to |Δ| < 1e-12 (they are in fact bit-identical). Prints ratios.
Times are this process's CPU time (`time.process_time`), best of N interleaved repeats, so other
processes sharing the cores distort them less than wall-clock time would.

Run: python bench/bench_prr.py [--traces 40] [--repeat 3]
Needs the dev extra (rouge-score) for the baseline; not part of the test suite.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from videoseek.rewards.process import prepare_steps, process_reward
from videoseek.rewards.rouge import _stem
from videoseek.rewards.steps import split_sentences

SUBJECTS = ["the man", "a woman", "the child", "the dog", "the cyclist", "the chef", "a person in red", "the driver"]
VERBS = ["picks up", "puts down", "opens", "closes", "walks towards", "moves away from", "looks at", "pushes", "pulls", "throws"]
OBJECTS = ["the door", "a cup", "the red box", "the bicycle", "a knife", "the window", "the ball", "a large bag", "the fridge"]
TAILS = [
    "at 00:00:12.5", "near the left edge of the frame", "while the camera pans right", "after a short pause",
    "which suggests the action is reversed", "so the state changes from open to closed", "e.g. like before",
    "slowly and carefully", "in the second half of the clip", "before the scene cuts to the street",
]
REASONING = ["Therefore the answer is B.", "This means the object is moving left.", "So the motion is accelerating.", "Wait, let me check the frames again."]


def clause(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"


def sentence(rng: random.Random) -> str:
    """One reasoning sentence of about 25-35 words, the length of the seeds' examples."""
    s = f"{clause(rng)}, and then {clause(rng)}, while {clause(rng)}."
    if rng.random() < 0.3:
        s += f" {rng.choice(REASONING)}"
    return s[0].upper() + s[1:]


def make_trace(rng: random.Random, n_sentences: int) -> str:
    text = " ".join(sentence(rng) for _ in range(n_sentences))
    return text


def trace_with_steps(rng: random.Random, target_steps: int) -> str:
    """A paragraph that splits into exactly `target_steps` sentences."""
    while True:
        text = make_trace(rng, target_steps)
        steps = split_sentences(text)
        if len(steps) >= target_steps:
            return " ".join(steps[:target_steps])


# ---- the public-code path: rouge-score per pair + pure-Python SDTW ---------------------------
def baseline_prr(generated_steps, reference_steps, scorer, alpha=1.0, k_ref=2, k_target=2) -> float:
    n, m = len(reference_steps), len(generated_steps)
    cost = []
    for r in reference_steps:
        row = []
        for g in generated_steps:
            s = scorer.score(r, g)
            row.append(1 - (s["rouge1"].fmeasure + s["rouge2"].fmeasure + s["rougeL"].fmeasure) / 3)
        cost.append(row)
    P = [[0.0] * (m + 1)] + [[math.inf] * (m + 1) for _ in range(n)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            diag = P[i - 1][j - 1]
            up = min(P[i - k][j] for k in range(1, min(k_ref, i) + 1))
            left = min(P[i][j - k] for k in range(1, min(k_target, j) + 1))
            P[i][j] = cost[i - 1][j - 1] + min(diag, up, left)
    return math.exp(-alpha * min(P[n][1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=40, help="generated traces per group (each 20 steps)")
    parser.add_argument("--repeat", type=int, default=5, help="timing repeats (best of)")
    args = parser.parse_args()
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rng = random.Random(0)
    reference = trace_with_steps(rng, 8)
    generated = [trace_with_steps(rng, 20) for _ in range(args.traces)]
    ref_steps = split_sentences(reference)
    gen_steps = [split_sentences(g) for g in generated]
    assert len(ref_steps) == 8 and all(len(g) == 20 for g in gen_steps)

    # values first (also warms nothing that the timed runs below rely on: caches are cleared)
    base_vals = [baseline_prr(g, ref_steps, scorer) for g in gen_steps]
    fast_vals = [process_reward(g, reference) for g in generated]
    max_delta = max(abs(a - b) for a, b in zip(base_vals, fast_vals))

    feature_cache = prepare_steps.__globals__["_cached_features"]
    reference_cache = prepare_steps.__globals__["_cached_reference"]

    def time_baseline() -> float:
        t0 = time.process_time()
        for g in gen_steps:
            baseline_prr(g, ref_steps, scorer)
        return (time.process_time() - t0) / len(gen_steps)

    def time_cold() -> float:
        total = 0.0
        for g in generated:
            _stem.cache_clear()  # every cache empty before each trace: split, tokenize, stem afresh
            feature_cache.cache_clear()
            reference_cache.cache_clear()
            t0 = time.process_time()
            process_reward(g, reference)
            total += time.process_time() - t0
        return total / len(generated)

    def time_warm(texts: list[str]) -> float:
        # the training-time case: texts new to the feature cache, the group's reference cached,
        # a vocabulary the stem memo has mostly seen
        feature_cache.cache_clear()
        reference_cache.cache_clear()
        process_reward(texts[0], reference)
        t0 = time.process_time()
        for g in texts[1:]:
            process_reward(g, reference)
        return (time.process_time() - t0) / (len(texts) - 1)

    # interleave the three measurements so load from other processes hits them alike; best of N
    rng2 = random.Random(1)
    base, cold, warm = [], [], []
    for _ in range(args.repeat):
        base.append(time_baseline())
        cold.append(time_cold())
        warm.append(time_warm([trace_with_steps(rng2, 20) for _ in range(args.traces + 1)]))
    base, cold, warm = min(base), min(cold), min(warm)

    print(f"PRR 20 generated x 8 reference steps, {args.traces} traces, best of {args.repeat}")
    print(f"  max |delta| vs rouge-score + pure-Python SDTW: {max_delta:.3e}  (identical: {base_vals == fast_vals})")
    print(f"  baseline (rouge-score + Python SDTW): {base * 1e3:8.2f} ms / reward")
    print(f"  videoseek, all caches cold per trace: {cold * 1e3:8.2f} ms / reward  -> {base / cold:6.1f}x faster")
    print(f"  videoseek, new texts, warm stems:     {warm * 1e3:8.2f} ms / reward  -> {base / warm:6.1f}x faster")
    print(f"  median reward {statistics.median(fast_vals):.4f}")

    # sentence splitters on the same traces: the default regex against pysbd
    split_sentences(generated[0], method="pysbd")  # build pysbd's segmenter outside the timing
    t_regex = min(_timed(lambda: [split_sentences(g) for g in generated]) for _ in range(args.repeat)) / len(generated)
    t_pysbd = min(_timed(lambda: [split_sentences(g, method="pysbd") for g in generated]) for _ in range(2)) / len(generated)
    agree = sum(split_sentences(g) == split_sentences(g, method="pysbd") for g in generated)
    print(f"  splitter per trace: regex {t_regex * 1e3:.3f} ms, pysbd {t_pysbd * 1e3:.2f} ms ({t_pysbd / t_regex:.0f}x); same split on {agree}/{len(generated)} traces")


def _timed(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


if __name__ == "__main__":
    main()

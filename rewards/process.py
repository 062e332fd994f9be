"""Process Reasoning Reward (PRR) of MOSS-ChatV (seed 000, §3, Algorithms 1–2, eqs. 6–12).

1. Split the generated reasoning (the `<think>` part) and the reference reasoning into steps
   (eqs. 6–7; `videoseek.rewards.steps`).
2. Cost matrix with reference steps as rows: C[i, j] = 1 − ROUGE_avg(g_j, r_i), ROUGE_avg the
   mean of the ROUGE-1/2/L F-measures with Porter stemming (eqs. 8–9), equal to `rouge-score`.
3. D_sdtw = Subsequence DTW of C with jump steps (Algorithm 2, eq. 10): the whole reference
   aligned to the best-matching part of the generation.
4. R_proc = exp(−α·D_sdtw) (eqs. 11–12).

The seed leaves α open ("a tunable hyperparameter") and does not normalise D; defaults here:
α = 1.0 on the raw D_sdtw, and `normalize=True` divides D by the number of reference steps
(so α means the same for short and long references; off by default to stay with the paper).
A trace with no step, or a reference with none, gets 0 (nothing to align). Text without
ASCII letters or digits has no ROUGE tokens (rouge-score's tokenizer) and so costs 1 per step.

Speed: reference steps are shared by every rollout of a group, so they are prepared once
(`prepare_reference`: steps, vocabulary, n-gram counts, LCS masks; a bounded LRU keyed by text)
and each rollout only maps its own tokens through them; see `rouge.RougeReference`.

>>> ref = "The man picks up the cup. He drinks from it. He puts it down."
>>> process_reward(ref, ref)
1.0
>>> round(process_reward("He picks up a cup. He drinks. Then he leaves.", ref), 4)
0.3114
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .rouge import RougeFeatures, RougeReference, rouge_avg_matrix, rouge_features
from .steps import split_steps


def subsequence_dtw(cost, k_ref: int = 2, k_target: int = 2) -> float:
    """Subsequence DTW distance, exactly Algorithm 2 of MOSS-ChatV; `cost` rows are reference steps.

    P[0, j] = 0 for every j (the alignment may start anywhere in the target), P[i, 0] = ∞ for
    i ≥ 1, and P[i, j] = C[i, j] + min(P[i−1, j−1], min_{1≤k≤min(k_ref,i)} P[i−k, j],
    min_{1≤k≤min(k_target,j)} P[i, j−k]); the result is min_j P[n, j] (it may end anywhere).
    With no reference row the distance is 0; with no target column it is ∞. As written in the
    paper, a vertical jump (k_ref ≥ 2) skips reference rows, the first one included (a jump from
    the free row 0), so a reference step that nothing matches can be bypassed.

    >>> subsequence_dtw([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])   # skip the middle target step
    0.0
    >>> subsequence_dtw([[0.5, 0.2]], k_ref=1, k_target=1)
    0.2
    """
    rows = np.asarray(cost, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"cost: expected a 2-D matrix, got shape {rows.shape}")
    if k_ref < 1 or k_target < 1:
        raise ValueError(f"k_ref and k_target must be >= 1, got {k_ref} and {k_target}")
    n, m = rows.shape
    if n == 0:
        return 0.0
    if m == 0:
        return math.inf
    c = rows.tolist()  # Python floats: the DP below is scalar, and lists index faster than arrays
    inf = math.inf
    table = [[0.0] * (m + 1)] + [[inf] * (m + 1) for _ in range(n)]
    for i in range(1, n + 1):
        row, ci = table[i], c[i - 1]
        ups = [table[i - k] for k in range(1, min(k_ref, i) + 1)]
        diag = table[i - 1]
        for j in range(1, m + 1):
            best = diag[j - 1]
            for up in ups:
                if up[j] < best:
                    best = up[j]
            for k in range(1, min(k_target, j) + 1):
                if row[j - k] < best:
                    best = row[j - k]
            row[j] = ci[j - 1] + best
    return min(table[n][1:])


@lru_cache(maxsize=4096)
def _cached_features(text: str, method: str) -> tuple[RougeFeatures, ...]:
    return tuple(rouge_features(s) for s in split_steps(text, method))


def prepare_steps(steps: str | Sequence[str], method: str = "regex") -> tuple[RougeFeatures, ...]:
    """ROUGE features of each step of a text (split, cached by text) or of a list of steps.

    Call it once on a reference and pass the result to `process_reward` for every rollout; text
    inputs are memoised anyway (bounded LRU), so passing the string again costs a dict lookup.
    """
    if isinstance(steps, str):
        return _cached_features(steps, method)
    if steps and isinstance(steps[0], RougeFeatures):
        return tuple(steps)
    return tuple(rouge_features(s) for s in steps)


@lru_cache(maxsize=1024)
def _cached_reference(text: str, method: str) -> RougeReference:
    return RougeReference(_cached_features(text, method))


def prepare_reference(reference, method: str = "regex") -> RougeReference:
    """A reference reasoning prepared for scoring many rollouts (steps, vocabulary, counts, LCS masks).

    Strings are memoised (bounded LRU keyed by text), so every rollout of a group reuses one.
    """
    if isinstance(reference, RougeReference):
        return reference
    if isinstance(reference, str):
        return _cached_reference(reference, method)
    return RougeReference(prepare_steps(reference, method))


def process_cost_matrix(generated, reference, method: str = "regex") -> np.ndarray:
    """C[i, j] = 1 − ROUGE_avg(g_j, r_i) with reference steps as rows (eq. 9)."""
    return 1 - rouge_avg_matrix(prepare_reference(reference, method), prepare_steps(generated, method))


def process_reward(
    generated,
    reference,
    alpha: float = 1.0,
    k_ref: int = 2,
    k_target: int = 2,
    method: str = "regex",
    normalize: bool = False,
    return_breakdown: bool = False,
) -> float | tuple[float, dict]:
    """PRR = exp(−α·D_sdtw) of a generated reasoning against a reference reasoning (eq. 12).

    `generated` and `reference` are texts (only `<think>` content counts when present; explicit
    `<step>` tags win over sentence splitting), lists of step strings, or `prepare_steps` output;
    `reference` may also be a `prepare_reference` result, reused across a group's rollouts.
    """
    ref, gen = prepare_reference(reference, method), prepare_steps(generated, method)
    if not ref.n or not gen:
        result = (0.0, {"distance": math.inf, "ref_steps": ref.n, "gen_steps": len(gen)})
        return result if return_breakdown else 0.0
    cost = 1 - ref.avg_matrix(gen)
    distance = subsequence_dtw(cost, k_ref, k_target)
    scaled = distance / ref.n if normalize else distance
    reward = math.exp(-alpha * scaled)
    if not return_breakdown:
        return reward
    return reward, {"distance": distance, "ref_steps": ref.n, "gen_steps": len(gen), "cost": cost}

"""GRPO's group statistics and outcome advantages: the one definition every reader and driver calls.

verl's `compute_grpo_outcome_advantage` (core_algos.py) normalises each group's scores as
(r - mean) / (std + eps) with torch's unbiased std; for a group of one it uses mean 0 and std 1,
so the advantage is the reward itself. VideoSeek's `videoseek_grpo` estimator gives such a group
0 instead (one rollout has no baseline), and so do these. The local backend trains through that
estimator (`training/local_backend/grpo.py`); the rollout runner, the step records and the viewer use
these, which compute the same numbers without torch (tests/test_training_estimators.py checks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

EPSILON = 1e-6  # verl's `epsilon` default


def group_stats(rewards: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and unbiased std of one group's rewards, as GRPO normalises them (None, None for fewer than two).

    >>> group_stats([1.0, 0.0])
    (0.5, 0.7071067811865476)
    >>> group_stats([1.0])
    (None, None)
    """
    if len(rewards) < 2:
        return None, None
    mean = math.fsum(rewards) / len(rewards)
    return mean, math.sqrt(math.fsum((float(r) - mean) ** 2 for r in rewards) / (len(rewards) - 1))


def group_advantages(rewards: Sequence[float], eps: float = EPSILON, norm_by_std: bool = True) -> np.ndarray:
    """GRPO outcome advantages of one group: (r - mean) / (std + eps) (0 for a group of one).

    >>> group_advantages([1.0, 0.0]).round(4).tolist()
    [0.7071, -0.7071]
    """
    r = np.asarray(rewards, dtype=np.float64)
    mean, std = group_stats(list(map(float, r)))
    if mean is None:
        return np.zeros_like(r)
    return (r - mean) / (std + eps) if norm_by_std else r - mean


def term_push(
    components: Sequence[Mapping[str, float]],
    weights: Mapping[str, float],
    values: Sequence[float],
    eps: float = EPSILON,
    norm_by_std: bool = True,
) -> dict[str, float]:
    """Per weighted reward term, how one group's advantages push a per-episode quantity up (+) or down (-).

    The advantage is a sum over terms, A_i = sum_k w_k (c_ik - mean_k) / (std + eps), so
    sum_i A_i (v_i - mean v) splits into one part per term: which term makes GRPO favour the
    episodes with more of `values` (crop calls, turns) and which the ones with less. The std is
    that of the group's total rewards (GRPO's), so a term that alone varies in a group gets a
    full-size advantage whatever its weight; `norm_by_std=False` is Dr. GRPO's (r - mean).

    >>> push = term_push([{"accuracy": 1, "clue_seek": 0.5}, {"accuracy": 1, "clue_seek": -0.5}],
    ...                  {"accuracy": 1, "clue_seek": 0.25}, values=[1, 3])
    >>> {k: round(v, 3) for k, v in push.items()}
    {'accuracy': 0.0, 'clue_seek': -1.414}
    >>> round(term_push([{"clue_seek": 0.5}, {"clue_seek": -0.5}], {"clue_seek": 0.25}, [1, 3], norm_by_std=False)["clue_seek"], 3)
    -0.25
    """
    if len(components) < 2:
        return {k: 0.0 for k in weights}
    terms = {k: np.array([w * float(c.get(k, 0.0)) for c in components]) for k, w in weights.items()}
    _, std = group_stats(list(map(float, sum(terms.values()))))
    scale = (std + eps) if norm_by_std else 1.0
    v = np.asarray(values, dtype=np.float64)
    dv = v - v.mean()
    return {k: float(np.dot(t - t.mean(), dv) / scale) for k, t in terms.items()}

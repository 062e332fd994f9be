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
from collections.abc import Sequence

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

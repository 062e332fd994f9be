"""GRPO's group statistics and outcome advantages: the one definition every reader and driver calls.

verl's `compute_grpo_outcome_advantage` (core_algos.py) normalises each group's scores as
(r - mean) / (std + eps) with torch's unbiased std; for a group of one it uses mean 0 and std 1,
so the advantage is the reward itself. VideoSeek's `videoseek_grpo` estimator gives such a group
0 instead (one rollout has no baseline), and so do these. The local backend trains through that
estimator (`training/local_backend/grpo.py`); the rollout runner, the step records and the viewer use
these, which compute the same numbers without torch (tests/training/test_estimators.py checks).
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


# ---- turn-level credit (issue 37, candidate a) ---------------------------------------------------
TURN_WEIGHT = 1.0  # λ: MT-GRPO's turn/outcome mix (Zeng et al. 2025 use 1)


def reward_to_go(turn_rewards: Sequence[float]) -> list[float]:
    """G_t = sum of the turn rewards from turn t on (no discount: an episode is a handful of turns).

    >>> reward_to_go([1.0, 0.0, 1.0, 0.0])
    [2.0, 1.0, 1.0, 0.0]
    """
    out, acc = [], 0.0
    for r in reversed(list(turn_rewards)):
        acc += float(r)
        out.append(acc)
    return out[::-1]


def turn_terms(
    turn_rewards: Sequence[Sequence[float]],
    group_ids: Sequence[str],
    weight: float = TURN_WEIGHT,
    eps: float = EPSILON,
    norm_by_std: bool = True,
) -> list[list[float]]:
    """Per episode, per turn: the turn part λ·(G_{i,t} − mean_g G)/(std_g G + ε) of `turn_advantages`.

    >>> [[round(a, 3) for a in row] for row in turn_terms([[0, 1, 0], [0, 0, 0]], ["a", "a"])]
    [[1.291, 1.291, -0.645], [-0.645, -0.645, -0.645]]
    """
    if len(turn_rewards) != len(group_ids):
        raise ValueError(f"turn_rewards ({len(turn_rewards)}) and group_ids ({len(group_ids)}) differ in length")
    togo = [reward_to_go(r) for r in turn_rewards]
    out: list[list[float]] = [[0.0] * len(r) for r in turn_rewards]
    members: dict[str, list[int]] = {}
    for i, g in enumerate(group_ids):
        members.setdefault(str(g), []).append(i)
    for rows in members.values():
        mean, std = group_stats([g for i in rows for g in togo[i]])
        if len(rows) < 2 or mean is None or not std:
            continue  # a group of one has no baseline; no spread: no turn signal
        scale = (std + eps) if norm_by_std else 1.0
        for i in rows:
            out[i] = [weight * (g - mean) / scale for g in togo[i]]
    return out


def turn_advantages(
    outcomes: Sequence[float],
    turn_rewards: Sequence[Sequence[float]],
    group_ids: Sequence[str],
    weight: float = TURN_WEIGHT,
    eps: float = EPSILON,
    norm_by_std: bool = True,
) -> list[list[float]]:
    """Per episode, per turn: A_{i,t} = Â_i + λ·(G_{i,t} − mean_g G)/(std_g G + ε).

    The formula, its source and each choice:
    - Â_i = (R_i − mean_g R)/(std_g R + ε): GRPO's outcome advantage within the origin group g
      (Shao et al. 2024; `group_advantages`); R_i is the preset's episode reward, as trajectory GRPO uses it.
    - G_{i,t} = Σ_{t'≥t} r_{i,t'} (`reward_to_go`), r the turn rewards (`agents.groups.turn_rewards_of`:
      seed 003's step signal, 1 for a call whose evidence gain exceeds 0.1): the turn-level
      reward-to-go of MT-GRPO (Zeng et al. 2025, "Reinforcing multi-turn reasoning in LLM agents
      via turn-level credit assignment", Â = Â^O + λ·Â^T), extended from its two turns to any
      number as DeepSeekMath's process supervision does (§4.1.3: a token's advantage sums the
      normalised step rewards from its step on); no discount (an episode is a handful of turns).
    - G is normalised over every turn of every episode of the group (pooled mean and unbiased
      std, as GRPO's over episodes); with no spread (no useful call in the group, or every turn
      alike) the turn term is 0 and A = Â: trajectory GRPO.
    - λ = `weight` (default 1, MT-GRPO's); `norm_by_std=False` drops both stds (Dr. GRPO).
    - A group of one episode has no baseline: every turn gets 0, as in `group_advantages`.

    >>> [[round(a, 3) for a in row] for row in turn_advantages([1.0, 1.0], [[0, 1, 0], [0, 0, 0]], ["a", "a"])]
    [[1.291, 1.291, -0.645], [-0.645, -0.645, -0.645]]
    >>> [[round(a, 4) for a in row] for row in turn_advantages([1.0, 0.0], [[0.0], [0.0]], ["a", "a"])]  # no turn spread: trajectory GRPO
    [[0.7071], [-0.7071]]
    """
    if len(outcomes) != len(group_ids):
        raise ValueError(f"outcomes ({len(outcomes)}) and group_ids ({len(group_ids)}) differ in length")
    terms = turn_terms(turn_rewards, group_ids, weight, eps, norm_by_std)
    outcome = np.zeros(len(outcomes))
    members: dict[str, list[int]] = {}
    for i, g in enumerate(group_ids):
        members.setdefault(str(g), []).append(i)
    for rows in members.values():
        outcome[rows] = group_advantages([outcomes[i] for i in rows], eps=eps, norm_by_std=norm_by_std)
    return [[float(outcome[i]) + t for t in row] for i, row in enumerate(terms)]

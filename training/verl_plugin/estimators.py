"""Advantage estimator `videoseek_grpo`, registered in verl's `core_algos` registry.

GRPO (Shao et al., 2024) as VideoMend §5.5 (seed 002, eq. for A_i) uses it: the advantage of a
rollout is its reward normalised by the mean and std of its *origin* group,
A_i = (R_i - mean({R_j})) / std({R_j}). The arithmetic is verl's own
`compute_grpo_outcome_advantage`; this module only decides which rows form the group.

Rows whose `response_mask` is all zero carry no model token the policy could be credited
for: an episode the environment could not run (a crash recorded by the agent loop) or, in the
alternative "enlarged group" layout, a perturbed session that is only there to be compared
against. Those rows are left out of the group statistics and get advantage 0, so a failure never
shifts the baseline of the episodes that did run. A group left with a single rollout has no
baseline: its advantage is 0 (verl's `grpo` would hand it its raw reward, mean 0 and std 1 for
a group of one, pushing up whatever that lone rollout did). Otherwise the result equals verl's
`grpo` estimator exactly (a test checks this).

`norm_adv_by_std_in_grpo` is read from the algorithm config because verl passes custom
estimators only `token_level_rewards`, `response_mask`, `index` and `config`.

`videoseek_turn_grpo` (issue 37): turn-level credit, `rewards.advantage.turn_advantages` per
token. A turn is a run of 1s in `response_mask` (the agent loop masks every tool turn 0 between
two assistant turns; the local backend's loss mask has the same runs). The only per-row channel
verl gives an estimator is `token_level_rewards`, so the turn rewards travel there: each turn's
reward sits on the turn's first token and the episode reward where verl puts it (the last
response token; the local backend: the last policy token) - `place_turn_rewards` writes that
layout (the agent loop's `TurnRewardOutput.as_dict`, the local backend's `grpo_update`),
`read_turn_rewards` reads it back (outcome = row sum − turn rewards, in float64, exact). A turn of
one token holds no turn reward (no accepted call fits in one token; a penalty on one is dropped),
so it never collides with the outcome. verl's reported `critic/score` is then the row sum, outcome plus turn rewards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import (
    ADV_ESTIMATOR_REGISTRY,
    compute_grpo_outcome_advantage,
    register_adv_est,
)

ESTIMATOR_NAME = "videoseek_grpo"


def rows_with_model_tokens(response_mask: torch.Tensor) -> torch.Tensor:
    """Indices of the rows that hold at least one policy token (response_mask == 1)."""
    return torch.nonzero(response_mask.sum(dim=-1) > 0, as_tuple=False).flatten()


def _norm_by_std(config: Any, default: bool = True) -> bool:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    value = getter("norm_adv_by_std_in_grpo", default) if getter is not None else getattr(config, "norm_adv_by_std_in_grpo", default)
    return bool(value)


def compute_videoseek_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool | None = None,
    config: Any = None,
    **unused: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO advantages over the rows that hold policy tokens; zero for the others and for groups of one.

    Args:
        token_level_rewards: (bs, response_length) rewards; a row's sum is its episode reward.
        response_mask: (bs, response_length), 1 on policy tokens.
        index: (bs,) group ids (verl's `uid`).
        epsilon: added to the std, as in verl.
        norm_adv_by_std_in_grpo: divide by the group std (GRPO) or not (Dr.GRPO); None reads
            `config.norm_adv_by_std_in_grpo` (default True).
        config: verl's `AlgoConfig` (or a dict-like), optional.

    Returns:
        (advantages, returns), both (bs, response_length), as every verl estimator returns.
    """
    norm = _norm_by_std(config) if norm_adv_by_std_in_grpo is None else bool(norm_adv_by_std_in_grpo)
    advantages = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    rows = rows_with_model_tokens(response_mask)
    if rows.numel():
        kept_index = np.asarray(index, dtype=object)[rows.cpu().numpy()]
        adv, _ = compute_grpo_outcome_advantage(
            token_level_rewards=token_level_rewards[rows],
            response_mask=response_mask[rows],
            index=kept_index,
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm,
        )
        _, inverse, counts = np.unique(kept_index.astype(str), return_inverse=True, return_counts=True)
        adv[torch.as_tensor(counts[inverse] == 1)] = 0.0  # a group of one: no baseline, no signal
        advantages[rows] = adv.to(advantages.dtype)
    return advantages, advantages


# ---- turn-level credit ------------------------------------------------------------------------
TURN_ESTIMATOR_NAME = "videoseek_turn_grpo"
TURN_WEIGHT_KEY = "videoseek_turn_weight"  # optional algorithm key (`+algorithm.videoseek_turn_weight=0.5`): λ


def turn_runs(mask_row: torch.Tensor) -> list[tuple[int, int]]:
    """(start, stop) of each run of 1s in one row of a response mask: the row's assistant turns.

    >>> turn_runs(torch.tensor([0, 1, 1, 0, 0, 1, 0, 1]))
    [(1, 3), (5, 6), (7, 8)]
    """
    m = (mask_row > 0).to(torch.int8).cpu()
    edges = torch.diff(torch.cat([torch.zeros(1, dtype=torch.int8), m, torch.zeros(1, dtype=torch.int8)]))
    starts = torch.nonzero(edges == 1).flatten().tolist()
    stops = torch.nonzero(edges == -1).flatten().tolist()
    return list(zip(starts, stops))


def place_turn_rewards(row: torch.Tensor, mask_row: torch.Tensor, turn_rewards: Sequence[float]) -> torch.Tensor:
    """Add each turn's reward on the first token of its run in `row` (in place; returns `row`).

    `turn_rewards` are per assistant turn in order. A credit (> 0: an accepted call) needs a turn of
    two tokens or more, and raises on a turn beyond the runs or shorter; a penalty (< 0:
    `clue_seek.turn_penalty`, a refused turn, which may be empty or cut) there has no token to sit
    on and is dropped. A row without policy tokens (a failed or over-turn-masked episode) gets
    none: it trains on nothing.

    >>> mask = torch.tensor([1, 1, 0, 1])
    >>> place_turn_rewards(torch.zeros(4), mask, [1.0, -1.0, -1.0]).tolist()  # the one-token and missing turns' penalties drop
    [1.0, 0.0, 0.0, 0.0]
    """
    runs = turn_runs(mask_row)
    if not runs:
        return row
    extra = list(turn_rewards)[len(runs):]
    if any(r > 0 for r in extra):
        raise ValueError(f"{len(turn_rewards)} turn rewards but {len(runs)} turns with tokens in the mask, and a reward on a turn without one")
    for (start, stop), r in zip(runs, turn_rewards):
        if not r:
            continue
        if stop - start < 2:
            if r > 0:
                raise ValueError(f"a rewarded turn needs two tokens or more (turn at {start} has {stop - start})")
            continue  # a penalty on a one-token turn: dropped
        row[start] += float(r)
    return row


def read_turn_rewards(row: torch.Tensor, mask_row: torch.Tensor) -> tuple[float, list[float]]:
    """(episode reward, per-turn rewards) of one row laid out by `place_turn_rewards`.

    >>> mask = torch.tensor([0, 1, 1, 0, 1, 1, 1, 0])
    >>> row = place_turn_rewards(torch.zeros(8), mask, [1.0, 0.0]); row[-1] += 0.25
    >>> read_turn_rewards(row, mask)
    (0.25, [1.0, 0.0])
    """
    values = row.detach().double().cpu()
    turns = [float(values[start]) if stop - start >= 2 else 0.0 for start, stop in turn_runs(mask_row)]
    return float(values.sum()) - sum(turns), turns


def _turn_weight(config: Any, default: float) -> float:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    value = getter(TURN_WEIGHT_KEY, default) if getter is not None else getattr(config, TURN_WEIGHT_KEY, default)
    return float(default if value is None else value)


def compute_videoseek_turn_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool | None = None,
    config: Any = None,
    turn_weight: float | None = None,
    **unused: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn-level GRPO: on each token of turn t of row i, Â_i + λ·(G_{i,t} − mean G)/(std G + ε)
    (`rewards.advantage.turn_advantages`, which states the formula and its sources).

    Â_i is `compute_videoseek_grpo_advantage` of the rows' episode rewards (so with no turn
    rewards in a group this estimator equals `videoseek_grpo` exactly); the turn term is
    `rewards.advantage.turn_terms` over the turns of the rows with policy tokens, grouped by
    `index`. λ: `turn_weight`, else the algorithm config's `videoseek_turn_weight`, else 1.
    """
    from videoseek.rewards.advantage import TURN_WEIGHT, turn_terms

    norm = _norm_by_std(config) if norm_adv_by_std_in_grpo is None else bool(norm_adv_by_std_in_grpo)
    weight = _turn_weight(config, TURN_WEIGHT) if turn_weight is None else float(turn_weight)
    outcome_rewards = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    rows = rows_with_model_tokens(response_mask).tolist()
    turns: list[list[float]] = []
    for i in rows:
        outcome, per_turn = read_turn_rewards(token_level_rewards[i], response_mask[i])
        last = int(torch.nonzero(response_mask[i] > 0).flatten()[-1])
        outcome_rewards[i, last] = outcome
        turns.append(per_turn)
    advantages, _ = compute_videoseek_grpo_advantage(outcome_rewards, response_mask, index, epsilon, norm, config)
    if rows:
        kept_index = [str(g) for g in np.asarray(index, dtype=object)[rows]]
        terms = turn_terms(turns, kept_index, weight, epsilon, norm)
        for i, row_terms in zip(rows, terms):
            for (start, stop), term in zip(turn_runs(response_mask[i]), row_terms):
                advantages[i, start:stop] += float(term)
        advantages = advantages * (response_mask > 0).to(advantages.dtype)
    return advantages, advantages


def _register(name: str, fn: Any) -> None:
    """Register `fn` under `name` (idempotent).

    verl refuses a second, different function under one name; a reload of this module (same
    qualified name) replaces the entry instead of failing.
    """
    existing = ADV_ESTIMATOR_REGISTRY.get(name)
    if existing is fn:
        return
    if existing is not None and getattr(existing, "__qualname__", "") == fn.__qualname__:
        ADV_ESTIMATOR_REGISTRY[name] = fn
        return
    register_adv_est(name)(fn)


def register() -> None:
    """Register `videoseek_grpo` and `videoseek_turn_grpo` (idempotent)."""
    _register(ESTIMATOR_NAME, compute_videoseek_grpo_advantage)
    _register(TURN_ESTIMATOR_NAME, compute_videoseek_turn_grpo_advantage)


register()

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
"""

from __future__ import annotations

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


def register() -> None:
    """Register `videoseek_grpo` (idempotent).

    verl refuses a second, different function under one name; a reload of this module (same
    qualified name) replaces the entry instead of failing.
    """
    existing = ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME)
    if existing is compute_videoseek_grpo_advantage:
        return
    if existing is not None and getattr(existing, "__qualname__", "") == compute_videoseek_grpo_advantage.__qualname__:
        ADV_ESTIMATOR_REGISTRY[ESTIMATOR_NAME] = compute_videoseek_grpo_advantage
        return
    register_adv_est(ESTIMATOR_NAME)(compute_videoseek_grpo_advantage)


register()

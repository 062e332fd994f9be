"""`videoseek_grpo` against verl's own GRPO estimator, and registration through the verl plugin."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from verl.trainer.ppo.core_algos import (
    compute_grpo_outcome_advantage,
    get_adv_estimator_fn,
)
from videoseek.training.verl_plugin.estimators import (
    ESTIMATOR_NAME,
    compute_videoseek_grpo_advantage,
)


def _batch(rewards: list[float], lengths: list[int], width: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Outcome rewards on the last policy token of each row, as verl's reward managers place them."""
    mask = torch.zeros(len(rewards), width, dtype=torch.int64)
    scores = torch.zeros(len(rewards), width)
    for i, (r, n) in enumerate(zip(rewards, lengths)):
        mask[i, :n] = 1
        scores[i, max(n - 1, 0)] = r
    return scores, mask


def test_equals_verl_grpo_when_every_row_has_tokens():
    scores, mask = _batch([1.0, 0.0, 0.5, 2.0, 1.0, 3.0], [3, 6, 2, 4, 1, 5])
    index = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    ours, _ = compute_videoseek_grpo_advantage(scores, mask, index)
    verl_adv, _ = compute_grpo_outcome_advantage(scores, mask, index)
    assert torch.allclose(ours, verl_adv, atol=1e-6)
    assert ours[0, 0] > 0 > ours[1, 0]  # above / below the group mean


def test_rows_without_policy_tokens_are_left_out_of_the_group():
    # Group "a": two real episodes and one empty (failed) row with a large reward.
    scores, mask = _batch([1.0, 0.0, 5.0, 2.0, 4.0], [3, 2, 0, 2, 2])
    index = np.array(["a", "a", "a", "b", "b"], dtype=object)
    ours, _ = compute_videoseek_grpo_advantage(scores, mask, index)
    assert torch.all(ours[2] == 0)
    keep = [0, 1, 3, 4]
    ref, _ = compute_grpo_outcome_advantage(scores[keep], mask[keep], index[keep])
    assert torch.allclose(ours[keep], ref, atol=1e-6)
    # With the failed row included, verl's plain GRPO would shift the baseline of the others.
    plain, _ = compute_grpo_outcome_advantage(scores, mask, index)
    assert not torch.allclose(plain[:2], ours[:2])


def test_a_group_with_one_surviving_rollout_gets_no_advantage():
    # Group "a" lost two of its three rollouts (empty rows); group "b" is whole.
    scores, mask = _batch([2.5, 1.0, 1.0, 0.0, 1.0], [3, 0, 0, 2, 2])
    index = np.array(["a", "a", "a", "b", "b"], dtype=object)
    ours, _ = compute_videoseek_grpo_advantage(scores, mask, index)
    assert torch.all(ours[:3] == 0)  # verl's grpo would give the lone rollout its raw reward
    plain, _ = compute_grpo_outcome_advantage(scores[[0]], mask[[0]], index[[0]])
    assert plain[0, 0] == pytest.approx(2.5)
    assert ours[4, 0] > 0 > ours[3, 0]


def test_std_normalisation_follows_the_algorithm_config():
    scores, mask = _batch([1.0, 0.0, 3.0], [2, 2, 2])
    index = np.array(["g", "g", "g"], dtype=object)
    dr, _ = compute_videoseek_grpo_advantage(scores, mask, index, config={"norm_adv_by_std_in_grpo": False})
    assert torch.allclose(dr[:, 0], torch.tensor([1.0 - 4 / 3, -4 / 3, 3.0 - 4 / 3]), atol=1e-6)
    normed, _ = compute_videoseek_grpo_advantage(scores, mask, index, config={"norm_adv_by_std_in_grpo": True})
    assert not torch.allclose(normed, dr)


def test_registered_in_this_process():
    assert get_adv_estimator_fn(ESTIMATOR_NAME) is compute_videoseek_grpo_advantage


def test_plain_import_verl_registers_through_the_entry_point():
    """A fresh process that only imports verl (as a Ray worker does) sees both registrations."""
    code = (
        "import json, verl\n"
        "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        "from videoseek.training.verl_plugin import plugin\n"
        "print(json.dumps({'est': 'videoseek_grpo' in ADV_ESTIMATOR_REGISTRY,"
        " 'loop': _agent_loop_registry.get('videoseek'), 'status': plugin.STATUS}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == {name: None for name in result["status"]}, result["status"]
    assert result["est"] is True
    assert result["loop"] == {"_target_": "videoseek.training.verl_plugin.agent_loop.VideoSeekAgentLoop"}


def test_the_torch_free_group_arithmetic_equals_verls():
    """`rewards.group_advantages` (what the runner, step records and viewer use) is `videoseek_grpo`'s
    arithmetic: verl's GRPO for groups of two or more, 0 for a group of one (verl's `grpo` gives r)."""
    from videoseek.rewards import group_advantages, group_stats

    rewards = {"a": [1.0, 0.0, 0.5], "b": [2.0, 1.0, 3.0, 2.5], "c": [0.7]}
    flat = [r for g in rewards.values() for r in g]
    scores, mask = _batch(flat, [2] * len(flat))
    index = np.array([g for g, rs in rewards.items() for _ in rs], dtype=object)
    for norm in (True, False):
        verl_adv, _ = compute_videoseek_grpo_advantage(scores, mask, index, norm_adv_by_std_in_grpo=norm)
        ours = np.concatenate([group_advantages(rs, norm_by_std=norm) for rs in rewards.values()])
        assert np.allclose(ours, verl_adv[:, 0].double().numpy(), atol=1e-5)
    mean, std = group_stats(rewards["b"])
    assert mean == pytest.approx(float(torch.tensor(rewards["b"]).mean())) and std == pytest.approx(float(torch.tensor(rewards["b"]).std()))

"""Turn-level credit (issue 37): the `videoseek_turn_grpo` estimator registered in verl's registry,
its arithmetic against `rewards.advantage.turn_advantages`, and the local backend training with it.
Both drivers giving the same per-token advantages is tests/training/test_engine_equivalence.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

pytest.importorskip("verl")

from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from videoseek.envs.trajectory import read_trajectories
from videoseek.rewards.advantage import turn_advantages
from videoseek.training.verl_plugin.estimators import (
    ESTIMATOR_NAME,
    TURN_ESTIMATOR_NAME,
    place_turn_rewards,
    read_turn_rewards,
    turn_runs,
)

# four episodes of two groups; turns are runs of 1s (tool tokens 0 between them)
MASKS = [
    [1, 1, 1, 0, 0, 1, 1, 0, 1, 1],
    [1, 1, 0, 0, 1, 1, 1, 1, 0, 0],
    [1, 1, 1, 1, 0, 1, 1, 0, 0, 0],
    [1, 1, 1, 0, 1, 1, 0, 1, 1, 1],
]
TURNS = [[1.0, 0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0, 0.0]]
OUTCOMES = [1.5, 0.25, 2.0, 1.0]
GROUPS = ["a", "a", "b", "b"]


def token_rewards(masks, outcomes, turns=None) -> torch.Tensor:
    rows = torch.zeros(len(masks), len(masks[0]))
    for i, m in enumerate(masks):
        mask = torch.tensor(m)
        rows[i, int(torch.nonzero(mask).flatten()[-1])] = outcomes[i]
        if turns is not None:
            place_turn_rewards(rows[i], mask, turns[i])
    return rows


def test_the_estimator_gives_each_turns_tokens_its_turn_advantage():
    mask = torch.tensor(MASKS, dtype=torch.float32)
    adv, returns = get_adv_estimator_fn(TURN_ESTIMATOR_NAME)(
        token_level_rewards=token_rewards(MASKS, OUTCOMES, TURNS), response_mask=mask, index=np.array(GROUPS, dtype=object), config={})
    expected = turn_advantages(OUTCOMES, TURNS, GROUPS)
    for i, m in enumerate(MASKS):
        for (start, stop), a in zip(turn_runs(torch.tensor(m)), expected[i]):
            assert adv[i, start:stop].tolist() == pytest.approx([a] * (stop - start), abs=1e-5)
        assert adv[i][mask[i] == 0].abs().sum() == 0  # tool tokens carry nothing
    assert torch.equal(adv, returns)
    assert len({round(a, 4) for a in expected[0]}) > 1  # turn credit: an episode's turns differ


def test_without_turn_rewards_it_is_trajectory_grpo_exactly():
    mask = torch.tensor(MASKS, dtype=torch.float32)
    index = np.array(GROUPS, dtype=object)
    rewards = token_rewards(MASKS, OUTCOMES)
    turn, _ = get_adv_estimator_fn(TURN_ESTIMATOR_NAME)(token_level_rewards=rewards, response_mask=mask, index=index, config={})
    plain, _ = get_adv_estimator_fn(ESTIMATOR_NAME)(token_level_rewards=rewards, response_mask=mask, index=index, config={})
    assert torch.equal(turn, plain)


def test_rows_without_tokens_and_groups_of_one_get_nothing():
    masks = [MASKS[0], [0] * 10, MASKS[2]]
    mask = torch.tensor(masks, dtype=torch.float32)
    rewards = token_rewards([MASKS[0], MASKS[1], MASKS[2]], OUTCOMES[:3], TURNS[:3])
    adv, _ = get_adv_estimator_fn(TURN_ESTIMATOR_NAME)(token_level_rewards=rewards, response_mask=mask,
                                                       index=np.array(["a", "a", "b"], dtype=object), config={})  # fmt: skip
    assert adv.abs().sum() == 0  # "a" lost its second episode (no tokens), "b" has one: no baseline anywhere


def test_the_reward_layout_reads_back_and_refuses_what_it_cannot_hold():
    mask = torch.tensor(MASKS[3])
    row = token_rewards([MASKS[3]], [0.3], [TURNS[3]])[0]
    assert read_turn_rewards(row, mask) == (pytest.approx(0.3), [0.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="two tokens"):
        place_turn_rewards(torch.zeros(4), torch.tensor([1, 0, 1, 1]), [1.0, 0.0])
    with pytest.raises(ValueError, match="turn without one"):
        place_turn_rewards(torch.zeros(4), torch.tensor([1, 1, 0, 0]), [0.0, 1.0])


def test_the_turn_weight_comes_from_the_algorithm_config():
    mask = torch.tensor(MASKS, dtype=torch.float32)
    kwargs = {"token_level_rewards": token_rewards(MASKS, OUTCOMES, TURNS), "response_mask": mask, "index": np.array(GROUPS, dtype=object)}
    half, _ = get_adv_estimator_fn(TURN_ESTIMATOR_NAME)(**kwargs, config={"videoseek_turn_weight": 0.5})
    expected = turn_advantages(OUTCOMES, TURNS, GROUPS, weight=0.5)
    start, stop = turn_runs(mask[0])[0]
    assert float(half[0, start]) == pytest.approx(expected[0][0], abs=1e-5)


FAST = {
    "max_turn_tokens": 24, "group_size": 3, "batch_size": 1,
    "env": {"initial_frames": 2, "frames_per_call": 2, "max_turns": 2, "max_total_frames": 8, "max_pixels": 112 * 112},
}  # fmt: skip


def test_the_local_backend_trains_with_turn_credit_and_over_turn_masking(tmp_path, index_sample):
    from videoseek.agents.tiny_model import ensure_tiny_model
    from videoseek.envs.sample import write_jsonl
    from videoseek.training import run_csgrpo

    torch.set_num_threads(1)
    tiny = ensure_tiny_model(cache_dir=tmp_path / "models")
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump(FAST))
    out = tmp_path / "run"
    argv = ["--backend", "local", "--model", str(tiny), "--data", str(data), "--steps", "2", "--reward", "prr", "--config", str(config),
            "--out", str(out), "--advantage", "turn", "--over-turn-mask", "--vision-reuse"]  # fmt: skip
    assert run_csgrpo.main(argv) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("look_on_n" in r for r in rows)
    record = json.loads((out / "rollouts" / "step_0001" / "grpo.json").read_text())
    for ep in record["episodes"]:
        assert len(ep["turn_advantages"]) <= len(ep["turn_rewards"])
    # over-turn masking: an episode cut by the turn limit is reported out of the baseline, as the update left it
    cut = {t.episode_id for t in read_trajectories(out / "rollouts" / "step_0001") if t.truncated}
    assert cut and all(ep["in_baseline"] is (ep["episode_id"] not in cut) for ep in record["episodes"])
    loop = yaml.safe_load((out / "agent_loop.yaml").read_text())
    assert loop[0]["videoseek"]["turn_rewards"] is True and loop[0]["videoseek"]["over_turn_mask"] is True


@pytest.mark.parametrize("start,forced", [("two_misses", 2), ("first_window", 1)])
def test_the_local_backend_trains_only_on_the_policys_turns_of_look_on_groups(tmp_path, index_sample, start, forced):
    """`--look-on-share 1`: every group starts with the forced crops of `--look-on-starts` (two that
    missed, or the first window); the update's loss covers the policy's turns only (one assistant
    segment per policy turn) and so do the turn rewards."""
    from videoseek.agents.tiny_model import ensure_tiny_model
    from videoseek.envs.sample import write_jsonl
    from videoseek.training import run_csgrpo

    torch.set_num_threads(1)
    tiny = ensure_tiny_model(cache_dir=tmp_path / "models")
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump({**FAST, "env": {**FAST["env"], "max_turns": 3}}))
    out = tmp_path / "run"
    argv = ["--backend", "local", "--model", str(tiny), "--data", str(data), "--steps", "1", "--reward", "csgrpo", "--config", str(config),
            "--out", str(out), "--advantage", "turn", "--look-on-share", "1", "--look-on-starts", start]  # fmt: skip
    assert run_csgrpo.main(argv) == 0
    trajs = {t.episode_id: t for t in read_trajectories(out / "rollouts" / "step_0001")}
    record = json.loads((out / "rollouts" / "step_0001" / "grpo.json").read_text())
    assert record["episodes"] and len(trajs) == 3
    for ep in record["episodes"]:
        t = trajs[ep["episode_id"]]
        assert [u.forced for u in t.turns[:forced]] == [True] * forced and not any(u.forced for u in t.turns[forced:])
        policy_turns = len(t.turns) - forced
        assert len(ep["turn_rewards"]) == policy_turns
        assert sum(seg["kind"] == "assistant" for seg in ep["segments"]) == policy_turns
        assert ep["tokens"]["assistant"] <= 24 * policy_turns + policy_turns  # the forced turns' ~40 tokens each are not trained
    loop = yaml.safe_load((out / "agent_loop.yaml").read_text())
    assert loop[0]["videoseek"]["look_on_share"] == 1.0 and loop[0]["videoseek"]["look_on_starts"] == [start]
    row = json.loads((out / "metrics.jsonl").read_text())
    # every group started looking on: the decision is reported apart, tool use is of the policy's own starts (none)
    assert row["look_on_n"] == 0.0 and "crop_rate" not in row
    if start == "two_misses":  # every such episode is in the look-on state; after one window, only where the policy misses again
        assert row["look_on_start/look_on_n"] == 3.0


def test_the_verl_backend_composes_the_turn_estimator_and_the_loop_options(tmp_path, index_sample):
    from videoseek.agents.tiny_model import ensure_tiny_model
    from videoseek.envs.sample import write_jsonl
    from videoseek.training import run_csgrpo

    tiny = ensure_tiny_model(cache_dir=tmp_path / "models")
    data = write_jsonl([index_sample.model_copy(update={"id": f"s{k}"}) for k in range(4)], tmp_path / "samples.jsonl")
    out = tmp_path / "verl"
    argv = ["--backend", "verl", "--dry-run", "--model", str(tiny), "--data", str(data), "--out", str(out), "--batch-size", "1",
            "--advantage", "turn", "--over-turn-mask", "--initial-frames", "2,4,8,16"]  # fmt: skip
    assert run_csgrpo.main(argv) == 0
    cfg = yaml.safe_load((out / "verl_config.yaml").read_text())
    assert run_csgrpo.main([*argv[:-1], "2,x"]) == 2  # a bad list is one line, exit 2
    assert cfg["algorithm"]["adv_estimator"] == TURN_ESTIMATOR_NAME
    loop = yaml.safe_load((out / "agent_loop.yaml").read_text())
    assert loop[0]["videoseek"]["turn_rewards"] is True and loop[0]["videoseek"]["over_turn_mask"] is True
    assert loop[0]["videoseek"]["initial_frames"] == [2, 4, 8, 16]
    assert run_csgrpo.main([*argv, "--look-on-share", "0.25"]) == 0
    assert yaml.safe_load((out / "agent_loop.yaml").read_text())[0]["videoseek"]["look_on_share"] == 0.25
    assert run_csgrpo.main([*argv, "--look-on-share", "1.5"]) == 2  # not a share: one line, exit 2
    assert run_csgrpo.main([*argv, "--look-on-share", "0.25", "--look-on-starts", "two_misses,first_window"]) == 0
    assert yaml.safe_load((out / "agent_loop.yaml").read_text())[0]["videoseek"]["look_on_starts"] == ["two_misses", "first_window"]
    assert run_csgrpo.main([*argv, "--look-on-starts", "two_misses,one_hit"]) == 2  # an unknown kind: one line, exit 2


def test_verl_step_tool_use_aggregates_each_step_and_warns_on_collapse(tmp_path):
    """The verl side's per-step tool-use aggregate (`group.StepToolUse`): a step's row when a later
    step starts, the local backend's keys, and CollapseWatch's one warning."""
    from videoseek.envs.metrics import EpisodeFacts, mean_metrics
    from videoseek.training.verl_plugin.group import StepToolUse

    agg = StepToolUse(["crop_video"], threshold=0.5, steps=2, sink=tmp_path / "tool_use.jsonl")
    called, silent = EpisodeFacts(calls={"crop_video": 2}, answered=True, turns=3), EpisodeFacts(answered=True, turns=1)
    assert agg.add(1, called) == [] and agg.add(1, silent) == []
    rows = agg.add(2, silent)
    assert rows == [{"step": 1, "episodes": 2, **mean_metrics([called, silent], ["crop_video"])}] and rows[0]["crop_rate"] == 0.5
    agg.add(3, silent)
    assert not agg.warnings
    rows = agg.flush()  # step 3 never sees a step 4
    assert [r["step"] for r in agg.rows] == [1, 2, 3] and len(agg.warnings) == 1 and "crop_video" in agg.warnings[0]
    assert [json.loads(line)["step"] for line in (tmp_path / "tool_use.jsonl").read_text().splitlines()] == [1, 2, 3]

"""Presets and group rewards: DM-GRPO, T-GRPO, SF-GRPO, ProcessThinker, CS-GRPO and PRR through
`score_episode` / `score_group`, on real `VideoSample`s and hand-worked numbers."""

import math

import pytest
from pydantic import ValidationError

from videoseek.envs.sample import VideoSample
from videoseek.rewards import (
    PRESETS,
    EpisodeSummary,
    RewardConfig,
    delta_mask_reward,
    rollout_process_reward,
    score_episode,
    score_group,
    step_bonus,
)

SAMPLE = VideoSample(
    id="door", video="v.mp4", question="What happens to the door?", options=["A. it opens", "B. it closes"], answer="B",
    duration=20.0, clue_intervals=[(4.0, 8.0)], reference_reasoning="The door is open. The person pushes it. The door closes.",
    key_frames=[{"time": 6.0, "boxes": {"door": [0.2, 0.1, 0.6, 0.9]}}],
    mask_patterns=[{"time_range": (4.0, 6.0), "oracle_correct": True}, {"time_range": (6.0, 8.0), "oracle_correct": False}],
)  # fmt: skip

REF_DELTA = (
    "<think>Reference frame at <time>00:00:04</time>: the door is open.\n"
    "From <time_range>00:00:04 - 00:00:08</time_range>, <delta>the person pushes it shut</delta>.\n"
    "Reasoning Summary: open then closed.</think><answer>{}</answer>"
)


def ep(answer, text=None, calls=(), invalid=0, **meta):
    text = text if text is not None else f"<think>The door closes.</think><answer>{answer}</answer>"
    return EpisodeSummary(prediction=answer, assistant_turns=[text], calls=list(calls), invalid_calls=invalid, duration=20.0, metadata=meta)


def test_delta_mask_rule():
    assert delta_mask_reward(False, 1.0, True) == 0.0
    assert delta_mask_reward(True, 0.5, True) == 0.3  # p~ = tau counts as ">= tau"
    assert delta_mask_reward(True, 0.49, True) == pytest.approx(0.1)
    assert delta_mask_reward(True, 1.0, False) == 0.0


def test_dmgrpo_group():
    cfg = RewardConfig(preset="dmgrpo")
    origin = [ep("B", REF_DELTA.format("B")), ep("A", REF_DELTA.format("A")), ep("B", "<think>closes</think><answer>B</answer>")]
    masked = [ep("B"), ep("A"), ep("A"), ep("A")]  # p~ = 0.25 < tau
    results = score_group(SAMPLE, origin, {"mask": masked}, cfg, perturbation={"kind": "mask", "pattern": 0})
    (t0, c0), (t1, c1), (t2, c2) = results
    # episode 0: correct, full Ref-Delta format, timestamps valid: 1 + 0.2*1 + (0.3 - 0.2)
    assert c0["ref_delta_format"] == 1.0 and c0["timestamp"] == 1.0 and c0["delta_mask"] == pytest.approx(0.1)
    assert t0 == pytest.approx(1.3)
    # episode 1: wrong answer: no delta-mask reward, still the timestamp term
    assert c1["delta_mask"] == 0.0 and t1 == pytest.approx(0.2)
    # episode 2: right but Ref-Delta format 0.3 < 0.4: timestamp and delta_mask gated to 0
    assert c2["ref_delta_format"] == pytest.approx(0.3) and c2["timestamp"] == 0.0 and c2["delta_mask"] == 0.0 and t2 == 1.0
    # with the critical pattern (oracle wrong) the test is void: c = 0
    void = score_group(SAMPLE, origin[:1], {"mask": masked}, cfg, perturbation={"kind": "mask", "pattern": 1})
    assert void[0][1]["delta_mask"] == 0.0
    # the env's record carries oracle_correct directly; a mostly-right masked group gives alpha
    right = score_group(SAMPLE, origin[:1], {"mask": [ep("B")] * 3}, cfg, perturbation={"oracle_correct": True})
    assert right[0][1]["delta_mask"] == 0.3 and right[0][0] == pytest.approx(1.5)


def test_dmgrpo_needs_its_group_and_oracle_label():
    cfg = RewardConfig(preset="dmgrpo")
    with pytest.raises(ValueError, match="mask"):
        score_group(SAMPLE, [ep("B")], {}, cfg)
    with pytest.raises(ValueError, match="oracle_correct"):
        score_group(SAMPLE, [ep("B", REF_DELTA.format("B"))], {"mask": [ep("B")]}, cfg)  # two patterns, none named


def test_tgrpo_group():
    cfg = RewardConfig(preset="tgrpo")
    origin = [ep("B"), ep("B"), ep("A")]  # p = 2/3
    shuffled = [ep("B"), ep("B"), ep("B")]  # p~ = 1: 2/3 < 0.8 -> no bonus
    assert [c["temporal"] for _, c in score_group(SAMPLE, origin, {"shuffle": shuffled}, cfg)] == [0.0, 0.0, 0.0]
    shuffled = [ep("B"), ep("A"), ep("A")]  # p~ = 1/3: 2/3 >= 0.8/3 -> +0.3 to correct answers
    out = score_group(SAMPLE, origin, shuffled, cfg)  # a plain list is the one group the preset needs
    assert [c["temporal"] for _, c in out] == [0.3, 0.3, 0.0]
    assert [t for t, _ in out] == pytest.approx([2.3, 2.3, 1.0])


def test_sfgrpo_group():
    out = score_group(SAMPLE, [ep("B"), ep("A")], {"blend": [ep("A"), ep("A"), ep("B")]}, RewardConfig(preset="sfgrpo"))
    assert [c["consistency"] for _, c in out] == [0.1, 0.0]


def test_processthinker_from_success_rates_and_fallback():
    text = "<think><step>The door is open.</step><step>It is pushed.</step><step>So it closes.</step></think><answer>B</answer>"
    cfg = RewardConfig(preset="processthinker")
    rates = [0.25, 0.75, 1.0]  # R_proc = 2/3 >= tau
    (total, comps), = score_group(SAMPLE, [ep("B", text)], None, cfg, success_rates=[rates])
    b = step_bonus(3)  # alpha*sqrt((3-2)/(6-2)) = 0.1
    assert b == pytest.approx(0.1)
    assert total == pytest.approx(1.0 + 2 / 3 + b) == comps["process_thinker"]
    # wrong answer and low rates: both gates give -B(K); with the process-only default only R_proc counts
    low = rollout_process_reward(text, accuracy=0.0, success_rates=[0.0, 0.25, 0.25], lambda_acc=0.5, lambda_proc=0.5)
    assert low == pytest.approx(1.0 + 0.5 * -b + 0.5 * -b + b)
    # no sampled rates: the episode's own outcome stands in for every prefix (1.0 when correct)
    (t_fallback, _), = score_group(SAMPLE, [ep("B", text)], None, cfg)
    assert t_fallback == pytest.approx(1.0 + 1.0 + b)
    # rates carried in the episode metadata are used when the argument is absent
    (t_meta, _), = score_group(SAMPLE, [ep("B", text, success_rates=rates)], None, cfg)
    assert t_meta == pytest.approx(total)


def test_processthinker_format_and_sampler():
    five = "<think>" + "".join(f"<step>s{i}</step>" for i in range(5)) + "</think><answer>B</answer>"
    calls = []

    def sampler(prefix, m):
        calls.append((tuple(prefix), m))
        return [True] * m if len(prefix) >= 3 else [True, False, False, False][:m]

    r, b = rollout_process_reward(five, 1.0, sampler=sampler, return_breakdown=True)
    assert [len(p) for p, _ in calls] == [1, 2, 3, 4, 5] and all(m == 4 for _, m in calls)
    assert b["rates"] == [0.25, 0.25, 1.0, 1.0, 1.0] and b["process"] == pytest.approx(0.7)
    assert r == pytest.approx(1.0 + 0.7 + 0.2 * math.sqrt(3 / 4))
    # K beyond K_max: only the first 6 prefixes are scored; an invalid format scores 0 and samples nothing
    eight = "<think>" + "".join(f"<step>s{i}</step>" for i in range(8)) + "</think><answer>B</answer>"
    assert rollout_process_reward(eight, 1.0, success_rates=[1.0] * 6) == 0.0  # K=8 outside [K_min, K_max]
    calls.clear()
    assert rollout_process_reward("<think><step>x</think><answer>B</answer>", 1.0, sampler=sampler) == 0.0 and not calls
    with pytest.raises(ValueError, match="success_rates"):
        rollout_process_reward(five, 1.0, success_rates=[1.0, 1.0])
    with pytest.raises(ValueError, match="lambda"):
        rollout_process_reward(five, 1.0, success_rates=[1.0] * 5, lambda_acc=0.5, lambda_proc=0.6)


def test_csgrpo_preset_sums_four_components():
    text = "<think>The <obj>door</obj><box>[0.2, 0.1, 0.6, 0.9]</box>at<t>6</t>s closes.</think><answer>B</answer>"
    total, comps = score_episode(SAMPLE, ep("B", text, calls=[(4.0, 8.0)]), RewardConfig(preset="csgrpo"))
    assert comps["accuracy"] == 1.0 and comps["format"] == 1.0 and comps["grounding"] == 1.0
    assert comps["clue_seek"] == pytest.approx(1.1)  # full coverage + one useful call
    assert total == pytest.approx(4.1)


def test_prr_preset_uses_the_reference_reasoning():
    text = "<think>The door is open. The person pushes it. The door closes.</think><answer>B</answer>"
    total, comps = score_episode(SAMPLE, ep("B", text), RewardConfig(preset="prr"))
    assert comps["process"] == 1.0 and total == 3.0
    no_ref = SAMPLE.model_copy(update={"reference_reasoning": None})
    assert score_episode(no_ref, ep("B", text), RewardConfig(preset="prr"))[1]["process"] == 0.0


def test_custom_weights_mix_families_and_bad_names_fail():
    cfg = RewardConfig(weights={"clue_seek": 0.5, "format": 0.0}, clue_seek={"gain_weight": 0.0})
    total, comps = score_episode(SAMPLE, ep("B", calls=[(4.0, 8.0)]), cfg)
    assert comps["clue_seek"] == 1.0 and total == pytest.approx(1.0 + 0.5)
    with pytest.raises(ValidationError, match="clue_seek"):
        RewardConfig(clue_seek={"bogus": 1.0})
    with pytest.raises(ValueError, match="ambiguous"):
        score_group(SAMPLE, [ep("B")], [ep("B")], RewardConfig())
    assert RewardConfig(preset="dmgrpo", weights={"timestamp": 0.5}).component_weights()["timestamp"] == 0.5
    assert RewardConfig(preset="dmgrpo").component_weights()["timestamp"] == PRESETS["dmgrpo"]["timestamp"]  # the table is what it computes
    with pytest.raises(ValueError, match="lam"):  # the old second place for λ is gone, with an error naming it
        RewardConfig(preset="dmgrpo", delta_mask={"lam": 0.5})

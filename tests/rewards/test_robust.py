"""Nothing a policy writes may crash scoring: arbitrary text through every preset gives finite numbers."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from videoseek.envs.sample import VideoSample
from videoseek.rewards import PRESETS, EpisodeSummary, RewardConfig, accuracy_reward, score_group

PIECES = [
    "<think>", "</think>", "<answer>", "</answer>", "<step>", "</step>", "<time>", "</time>", "<time_range>", "</time_range>",
    "<delta>", "</delta>", "<obj>", "</obj>", "<box>", "</box>", "<t>", "</t>", "<tool_call>", "</tool_call>", "[", "]", ",",
    " - ", " to ", "00:01:02.5", "1:75", "99999999999999999999", "1e999", "-3", "nan", "inf", "B", "(C)", "A.", "blue",
    "Reasoning Summary:", ". ", "\n", "é", "中", "0.5", "12", "from 3 to 1",
]  # fmt: skip
policy_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=5), max_size=30).map("".join)

SAMPLES = [
    VideoSample(id="mc", video="v.mp4", question="q", options=["A. red", "B. blue", "C. green"], answer="B", duration=30.0,
                clue_intervals=[(3.0, 9.0)], reference_reasoning="The ball is blue. It rolls.",
                key_frames=[{"time": 5.0, "boxes": {"ball": [0.1, 0.1, 0.3, 0.3]}}],
                mask_patterns=[{"time_range": (3.0, 5.0), "oracle_correct": True}]),
    VideoSample(id="tg", video="v.mp4", question="q", answer="from 3 to 9", problem_type="temporal_grounding", duration=30.0),
    VideoSample(id="rg", video="v.mp4", question="q", answer="0", problem_type="regression", duration=30.0),
    VideoSample(id="nm", video="v.mp4", question="q", answer="1e300", problem_type="numerical", duration=30.0),
    VideoSample(id="oc", video="v.mp4", question="q", answer="", problem_type="ocr", duration=30.0),
    VideoSample(id="ff", video="v.mp4", question="q", answer="a blue ball", problem_type="free_form", duration=30.0),
]  # fmt: skip
call = st.tuples(st.floats(-10, 40, allow_nan=False), st.floats(-10, 40, allow_nan=False)).map(lambda t: (min(t), max(t)))


@settings(max_examples=120, deadline=None)
@given(st.lists(policy_text, min_size=1, max_size=3), st.none() | policy_text, st.lists(call, max_size=5), st.integers(0, 3), st.sampled_from(SAMPLES))
def test_every_preset_scores_arbitrary_policy_text(turns, prediction, calls, invalid, sample):
    episode = EpisodeSummary(prediction=prediction, assistant_turns=turns, calls=calls, invalid_calls=invalid, duration=30.0)
    assert 0.0 <= accuracy_reward(prediction, sample) <= 1.0
    for preset in PRESETS:
        perturbed = {"mask": [episode], "shuffle": [episode], "blend": [episode]}
        results = score_group(sample, [episode, episode], perturbed, RewardConfig(preset=preset), perturbation={"oracle_correct": True})
        for total, components in results:
            assert math.isfinite(total) and all(math.isfinite(v) for v in components.values())

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from videos import read_index

import videoseek.envs  # noqa: F401  (registers the env)
from videoseek.envs import Answer, CropVideo, DataError, EnvConfig, Think, VideoSample, VideoSeekEnv, parse_action


def crop(s, e):
    return f'<tool_call>{{"name": "crop_video", "arguments": {{"start": {s}, "end": {e}}}}}</tool_call>'


def test_check_env_passes_as_gymnasium_ships_it(index_sample):
    """gymnasium's own checker, unpatched: observations never share memory (np.shares_memory)."""
    env = VideoSeekEnv(index_sample)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs["frames"].flags.writeable and len(obs["frames"]) == 8
    obs = env.step(crop(12, 14))[0]  # a crop's frames too
    assert obs["frames"].flags.writeable and len(obs["frames"]) == 8


def test_each_observation_owns_its_frames(index_sample):
    """A user's env: a fresh, writable array per observation, so writing to one changes no other
    observation, no other episode and not the env's record."""
    a, b = VideoSeekEnv(index_sample), VideoSeekEnv(index_sample)
    obs_a, _ = a.reset(seed=0)
    obs_b, _ = b.reset(seed=1)
    again, _ = a.reset(seed=0)
    assert not np.shares_memory(obs_a["frames"], obs_b["frames"]) and not np.shares_memory(obs_a["frames"], again["frames"])
    before = again["frames"].copy()
    obs_a["frames"][:] = 0
    np.testing.assert_array_equal(again["frames"], before)
    np.testing.assert_array_equal(a.frames_by_turn[-1], before)


def test_engine_episodes_share_one_read_only_copy(index_sample):
    """`share_frames=True` (what the episode drivers set): the episodes that see the same frames get
    the frame cache's one read-only array."""
    a, b = VideoSeekEnv(index_sample, share_frames=True), VideoSeekEnv(index_sample, share_frames=True)
    obs_a, _ = a.reset(seed=0)
    obs_b, _ = b.reset(seed=1)
    assert obs_a["frames"] is obs_b["frames"]  # two episodes, one copy of their initial frames
    with pytest.raises(ValueError, match="read-only"):
        obs_a["frames"][0, 0, 0] = 1
    user, _ = VideoSeekEnv(index_sample).reset(seed=0)
    np.testing.assert_array_equal(user["frames"], obs_a["frames"])  # the same pixels either way


def test_check_env_with_a_chinese_question(index_sample):
    zh = index_sample.model_copy(update={"question": "视频中闪烁的是什么颜色？", "options": ["A. 红色", "B. 绿色", "C. 蓝色", "D. 黄色"]})
    env = VideoSeekEnv(zh)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert "视频中闪烁的是什么颜色" in obs["text"] and "B. 绿色" in obs["text"]


def test_registered_with_gymnasium(index_sample):
    env = gym.make("videoseek/VideoSeek-v0", sample=index_sample)
    obs, _ = env.reset(seed=1)
    assert obs["frames"].shape[0] == 8


def test_sparse_frames_are_uniform_and_labelled(index_sample):
    env = VideoSeekEnv(index_sample)
    obs, info = env.reset(seed=0)
    assert obs["frames"].shape == (8, 96, 192, 3)
    # t_i = (i + 0.5) * 20 / 8 = 1.25, 3.75, ...: the frames shown then are floor(t * 10).
    expected = [int((i + 0.5) * 20 / 8 * 10) for i in range(8)]
    assert [read_index(f) for f in obs["frames"]] == expected
    np.testing.assert_allclose(obs["timestamps"], np.array(expected) / 10, atol=1e-4)
    assert info["error"] is None


def test_crop_returns_frames_of_the_span_and_updates_evidence(index_sample):
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("<think>look</think>" + crop(12, 14))
    assert info["error"] is None and not term and not trunc and reward == 0
    idx = [read_index(f) for f in obs["frames"]]
    assert len(idx) == 8 and all(120 <= i < 140 for i in idx) and idx == sorted(idx)
    np.testing.assert_allclose(obs["timestamps"], np.array(idx) / 10, atol=1e-4)
    # clue [12, 13.5] inside the crop [12, 14]: coverage 1, E = 1.5 / 2.
    assert info["evidence"]["coverage"] == pytest.approx(1.0)
    assert info["evidence"]["score"] == pytest.approx(0.75)
    call = env.trajectory.turns[-1].call
    assert call.gain == pytest.approx(0.75) and not call.clipped


def test_time_formats_and_clipping(index_sample):
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0)
    obs, *_, info = env.step('<tool_call>{"name": "crop_video", "arguments": {"start": "00:18", "end": "00:00:25.5"}}</tool_call>')
    assert info["error"] is None
    assert all(read_index(f) >= 180 for f in obs["frames"])
    call = env.trajectory.turns[-1].call
    assert call.clipped and call.end == pytest.approx(20.0) and call.requested == {"start": 18.0, "end": 25.5}


@pytest.mark.parametrize(
    "text,reason",
    [
        (crop(5, 5), "start < end"),
        (crop(9, 3), "start < end"),
        (crop(30, 40), "outside the video"),
        (crop(-5, 0), "outside the video"),
        (crop(3, 3.2), "shorter than the minimum"),
        ('<tool_call>{"name": "crop_video", "arguments": {"start": "soon"}}</tool_call>', "start and end"),
        ("<tool_call>not json</tool_call>", "not valid JSON"),
        ('<tool_call>{"name": "zoom", "arguments": {}}</tool_call>', "unknown tool"),
        ('<tool_call>{"name": "crop_video", "arguments": {"start": "NaN", "end": 3}}</tool_call>', "finite"),
    ],
)
def test_rejected_calls_cost_a_turn_and_return_no_frames(index_sample, text, reason):
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step(text)
    assert info["error"] is not None and reason in info["error"]
    assert "\n" not in info["error"]
    assert obs["frames"].shape[0] == 0 and obs["timestamps"].shape == (0,)
    assert len(env.trajectory.turns) == 1 and env.trajectory.turns[0].error == info["error"]
    assert env.evidence.calls == []


def test_answer_terminates_with_reward_components(index_sample):
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0)
    env.step(crop(12, 14))
    _, reward, term, trunc, info = env.step("<think>green flash at 12s</think><answer>B</answer>")
    assert term and not trunc
    comps = info["reward_components"]
    assert comps["accuracy"] == 1.0 and info["correct"] is True
    assert reward == pytest.approx(env.trajectory.reward)
    with pytest.raises(RuntimeError):
        env.step("<answer>B</answer>")


def test_wrong_answer_scores_lower(index_sample):
    rewards = []
    for ans in ("B", "C"):
        env = VideoSeekEnv(index_sample)
        env.reset(seed=0)
        rewards.append(env.step(f"<think>x</think><answer>{ans}</answer>")[1])
    assert rewards[0] > rewards[1]


def test_turn_budget_truncates(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(max_turns=3))
    env.reset(seed=0)
    assert env.step("hmm")[3] is False
    obs, _, _, _, info = env.step(Think())
    assert info["error"] is None
    _, reward, term, trunc, info = env.step("still thinking")
    assert trunc and not term and "reward_components" in info and info["correct"] is False


def test_frame_budget_rejects_crops_when_spent(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(max_total_frames=12, initial_frames=8, frames_per_call=8))
    env.reset(seed=0)
    obs, *_, info = env.step(CropVideo(2, 6))
    assert info["error"] is None and len(obs["frames"]) == 4
    obs, *_, info = env.step(CropVideo(8, 10))
    assert "budget" in info["error"] and len(obs["frames"]) == 0


def test_short_span_of_a_low_fps_video_returns_each_frame_once(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(min_span=0.1))
    env.reset(seed=0)
    obs, *_ = env.step(CropVideo(5.0, 5.25))
    idx = [read_index(f) for f in obs["frames"]]
    assert idx == sorted(set(idx)) == [50, 51, 52]


def test_structured_actions(index_sample):
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0)
    obs, *_ = env.step(CropVideo(12.0, 13.0))
    assert len(obs["frames"]) == 8
    *_, term, _, info = env.step(Answer("B"))
    assert term and info["reward_components"]["accuracy"] == 1.0
    # recorded as the text a model would have written, so every text-based reward reads them alike
    first, last = env.trajectory.turns
    assert parse_action(first.assistant).action == CropVideo(12.0, 13.0) and last.assistant == "<answer>B</answer>"


def test_mask_perturbation_blacks_out_exactly_the_range(index_sample):
    env = VideoSeekEnv(index_sample)
    obs, _ = env.reset(seed=0, options={"perturbation": {"kind": "mask", "time_range": [11.2, 13.9]}})
    obs, *_ = env.step(CropVideo(10.0, 16.0))
    for frame, t in zip(obs["frames"], obs["timestamps"]):
        in_range = 11 <= np.floor(t) <= 13  # floor(time) in [floor(s), floor(e)]
        assert (frame.max() == 0) == in_range, t
        if not in_range:
            assert read_index(frame) == round(t * 10)
    refs = env.trajectory.turns[-1].observation.frames
    assert [r.masked for r in refs] == [bool(11 <= np.floor(t) <= 13) for t in obs["timestamps"]]
    assert env.trajectory.group.role == "perturbed"


def test_mask_pattern_from_the_sample(index_sample):
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0, options={"perturbation": {"kind": "mask", "pattern": 1}})
    assert env.trajectory.group.perturbation["oracle_correct"] is False
    obs, *_ = env.step(CropVideo(12.0, 14.0))
    assert all(f.max() == 0 for f, t in zip(obs["frames"], obs["timestamps"]) if t < 14)


def test_shuffle_and_blend(index_sample):
    env = VideoSeekEnv(index_sample)
    obs, _ = env.reset(seed=3, options={"perturbation": {"kind": "shuffle"}})
    idx = [read_index(f) for f in obs["frames"]]
    expected = [int((i + 0.5) * 20 / 8 * 10) for i in range(8)]
    assert sorted(idx) == expected and idx != expected
    np.testing.assert_allclose(obs["timestamps"], np.array(expected) / 10, atol=1e-4)  # positions kept

    plain, _ = VideoSeekEnv(index_sample).reset(seed=0)
    blended, _ = VideoSeekEnv(index_sample).reset(seed=0, options={"perturbation": {"kind": "blend", "alpha": 0.5}})
    f = plain["frames"].astype(np.float32)
    ref = f.copy()
    for i in range(1, len(ref)):
        ref[i] = 0.5 * f[i] + 0.5 * ref[i - 1]
    np.testing.assert_array_equal(blended["frames"], np.round(ref).astype(np.uint8))


def test_same_seed_same_episode(index_sample):
    def run(seed):
        env = VideoSeekEnv(index_sample)
        obs, _ = env.reset(seed=seed, options={"perturbation": {"kind": "shuffle"}})
        return [read_index(f) for f in obs["frames"]]

    assert run(5) == run(5)


def test_policy_text_never_crashes_the_env(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(max_turns=50))
    env.reset(seed=0)
    nasty = ["", "<tool_call>", "<tool_call>{}</tool_call>", "<answer>", "\x00" * 100, "<tool_call>" + "[" * 5000 + "</tool_call>",
             '<tool_call>{"name": "crop_video", "arguments": {"start": 1e308, "end": 1e309}}</tool_call>',
             '<tool_call>{"name": "crop_video", "arguments": {"start": true, "end": [1]}}</tool_call>', 12345, None]  # fmt: skip
    for text in nasty:
        obs, reward, term, trunc, info = env.step(text)
        assert isinstance(obs["text"], str) and not term


def test_missing_and_bad_videos_name_the_sample(tmp_path, index_sample):
    gone = index_sample.model_copy(update={"video": str(tmp_path / "nope.mp4")})
    with pytest.raises(DataError, match=r"idx-1.*nope\.mp4.*not found"):
        VideoSeekEnv(gone)
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video at all" * 100)
    with pytest.raises(DataError, match="idx-1.*cannot decode"):
        VideoSeekEnv(index_sample.model_copy(update={"video": str(bad)}))
    beyond = index_sample.model_copy(update={"clue_intervals": [(18.0, 31.0)]})
    with pytest.raises(DataError, match=r"idx-1.*clue_intervals\.0.*beyond the video duration"):
        VideoSeekEnv(beyond)


@pytest.mark.parametrize("duplicate_tiou,duplicate", [(0.7, True), (0.8, False)])
def test_duplicate_threshold_of_the_reward_config_sets_the_call_record(index_sample, tmp_path, duplicate_tiou, duplicate):
    """`RewardConfig.clue_seek.duplicate_tiou` decides `Turn.call.duplicate_of`, the viewer's duplicate
    mark and the reward's duplicate count alike: crops [10, 14] and [10.5, 14.5] overlap with tIoU 3.5 / 4.5 = 0.78."""
    import json

    from videoseek.envs.trajectory import TrajectoryWriter
    from videoseek.rewards import RewardConfig, clue_seek_reward
    from videoseek.viewer.episode import episode_view

    reward = RewardConfig(preset="csgrpo")
    reward = reward.model_copy(update={"clue_seek": reward.clue_seek.model_copy(update={"duplicate_tiou": duplicate_tiou})})
    env = VideoSeekEnv(index_sample, EnvConfig(reward=reward))
    env.reset(seed=0, options={"episode_id": "dup"})
    env.step(crop(10, 14))
    env.step(crop(10.5, 14.5))
    env.step("<answer>B</answer>")
    second = env.trajectory.turns[1].call
    assert second.best_prior_tiou == pytest.approx(3.5 / 4.5)
    assert second.duplicate_of == (0 if duplicate else None) and not second.fragment
    # The reward counts the same duplicate: its duplicate term is the penalty, or nothing.
    penalty = reward.clue_seek.duplicate_penalty if duplicate else 0.0
    _, breakdown = clue_seek_reward(env.summary().calls, index_sample.clue_intervals, env.duration, params=reward.clue_seek, return_breakdown=True)
    assert breakdown["duplicate_term"] == pytest.approx(-penalty) and breakdown["duplicate_of"] == [None, 0 if duplicate else None]
    # What the viewer marks, read from the written trajectory.
    TrajectoryWriter(tmp_path).write(env.trajectory, env.frames_by_turn)
    (raw,) = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    calls = episode_view(raw, tmp_path, lambda p: p)["calls"]
    assert [c["duplicate_of_n"] for c in calls] == [None, 1 if duplicate else None]


@pytest.mark.parametrize("coverage_by", ["span", "frames"])
def test_coverage_by_frames_reads_the_frames_the_crop_returned(index_sample, coverage_by):
    """Two frames of a crop of the whole video step over the clue [12, 13.5]: "frames" records no
    coverage and no gain for that call, "span" full coverage; the summary carries the frame times
    the observation showed, so the reward re-scored from it is the env's."""
    from videoseek.rewards import RewardConfig, clue_seek_reward

    reward = RewardConfig(preset="csgrpo", clue_seek={"coverage_by": coverage_by})
    env = VideoSeekEnv(index_sample, EnvConfig(frames_per_call=2, reward=reward))
    env.reset(seed=0)
    obs, *_, info = env.step(crop(0, 20))
    shown = [float(t) for t in obs["timestamps"]]
    assert len(shown) == 2 and not any(12 <= t <= 13.5 for t in shown)
    assert info["evidence"]["coverage"] == (0.0 if coverage_by == "frames" else 1.0)
    obs, *_, info = env.step(crop(12.5, 13.5))
    # a frame in the clue: the clue is seen, and the first crop had retrieved all of it
    assert all(12 <= t <= 13.5 for t in obs["timestamps"]) and info["evidence"]["coverage"] == 1.0
    env.step("<think>green</think><answer>B</answer>")
    summary = env.summary()
    assert summary.call_frames[0] == pytest.approx(shown) and len(summary.call_frames) == 2
    assert env.trajectory.reward_components["clue_seek"] == pytest.approx(
        clue_seek_reward(summary.calls, index_sample.clue_intervals, env.duration, params=reward.clue_seek, call_frames=summary.call_frames))
    gains = [t.call.gain for t in env.trajectory.turns[:2]]
    assert (gains[0] == 0.0) == (coverage_by == "frames")

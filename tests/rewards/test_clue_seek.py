"""CS-GRPO clue-seek reward: hand-worked values, properties, and agreement with the env's EvidenceState."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from videoseek.envs.evidence import EvidenceState
from videoseek.rewards import ClueSeekParams, clue_seek_reward

CLUES = [(10.0, 20.0)]


def test_one_call_on_the_clue():
    # coverage 1, E = 10/12, 2 s of 60 outside the clue, one useful call: 1.0 * 1 - 2/60 + 0.1 * 1
    r, b = clue_seek_reward([(9, 21)], CLUES, 60, return_breakdown=True)
    assert b["coverage"] == 1.0 and b["evidence"] == pytest.approx(10 / 12) and b["useful"] == 1
    assert b["irrelevant"] == pytest.approx(2 / 60)
    assert r == pytest.approx(1.1 - 2 / 60)


def test_the_whole_video_in_one_crop_earns_almost_nothing():
    """Coverage alone would pay 1.0 for one crop of everything (frames as sparse as the initial
    ones); the footage outside the clue costs nearly all of it, below any crop that finds the clue."""
    whole, b = clue_seek_reward([(0, 60)], CLUES, 60, return_breakdown=True)
    assert b["coverage"] == 1.0 and whole == pytest.approx(1.0 - 50 / 60 + 0.1)  # E 1/6: a useful call
    sweep = clue_seek_reward([(0, 15), (15, 30)], CLUES, 60)  # quarters in order until the clue is seen
    assert whole < sweep < clue_seek_reward([(10, 20)], CLUES, 60)


def test_hand_worked_mixed_episode():
    calls = [(10, 15), (15.2, 20), (40, 50), (10, 15), (0, 1)]
    r, b = clue_seek_reward(calls, CLUES, 60, invalid_calls=1, return_breakdown=True)
    # E: 5/10 = .5 (+.5, useful); 9.8/10 = .98 (+.48, useful, adjacent: gap .2 -> fragment);
    # 9.8/20 = .49 (-.49, drop); dup of call 0 (gain 0); 9.8/21 (-.023, not a drop; not adjacent)
    assert b["gains"] == pytest.approx([0.5, 0.48, -0.49, 0.0, 9.8 / 21 - 0.49])
    assert (b["useful"], b["fragments"], b["drops"], b["duplicates"], b["invalid"]) == (2, 1, 1, 1, 1)
    assert b["calls"] == 6 and b["excess"] == 3
    assert b["coverage"] == pytest.approx(0.98)
    # retrieved [0, 1] + [10, 15] + [15.2, 20] + [40, 50]: 20.8 s, 9.8 of them on the clue
    expected = 0.98 - (20.8 - 9.8) / 60 + 0.1 * 2 - 0.1 * 3 - 0.2 * 1 - 0.1 * 1 - 0.2 * 1 - 0.1 * 1
    assert r == pytest.approx(expected)


def test_no_calls_and_no_clues():
    assert clue_seek_reward([], CLUES, 60) == 0.0
    assert clue_seek_reward([(1, 2)], [], 60) == 0.0  # nothing to cover, nothing gained, no penalty
    assert clue_seek_reward([(70, 80)], CLUES, 60) == 0.0  # entirely outside the video: ignored


def test_parameters_override_and_floor():
    assert clue_seek_reward([(9, 21)], CLUES, 60, gain_weight=0.0, irrelevant_weight=0.0) == pytest.approx(1.0)
    assert clue_seek_reward([(9, 21)], CLUES, 60, params=ClueSeekParams(coverage_weight=2.0)) == pytest.approx(2.1 - 2 / 60)
    many = [(50 + i * 0.01, 51 + i * 0.01) for i in range(30)]  # 30 near-duplicates
    assert clue_seek_reward(many, CLUES, 60) == -1.0  # min_reward floor
    with pytest.raises(ValueError):
        clue_seek_reward([(1, 2)], CLUES, 60, not_a_parameter=1.0)


def test_min_run_counts_fragments_from_the_nth_member():
    calls = [(10, 12), (12, 14), (14, 16), (16, 18)]  # one run of four adjacent fragments
    assert clue_seek_reward(calls, CLUES, 60, return_breakdown=True)[1]["fragments"] == 3
    assert clue_seek_reward(calls, CLUES, 60, min_run=3, return_breakdown=True)[1]["fragments"] == 2


interval = st.tuples(st.floats(0, 59), st.floats(0.2, 20)).map(lambda t: (round(t[0], 1), round(min(60.0, t[0] + t[1]), 1)))
calls_st = st.lists(interval, max_size=7)
clues_st = st.lists(interval, min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(calls_st, clues_st, st.integers(0, 3))
def test_bounds(calls, clues, invalid):
    p = ClueSeekParams()
    r = clue_seek_reward(calls, clues, 60, invalid_calls=invalid)
    # useful calls raise E by > 0.1 each and E <= 1, so at most 9 of them
    assert p.min_reward <= r <= p.coverage_weight + p.gain_weight * min(len(calls), 9)


@settings(max_examples=200, deadline=None)
@given(calls_st.filter(len), clues_st, st.data())
def test_a_duplicate_call_never_raises_the_reward(calls, clues, data):
    k = data.draw(st.integers(0, len(calls) - 1))
    at = data.draw(st.integers(k + 1, len(calls)))
    with_dup = calls[:at] + [calls[k]] + calls[at:]
    assert clue_seek_reward(with_dup, clues, 60) <= clue_seek_reward(calls, clues, 60) + 1e-12


# disjoint calls on a 6 s grid, at most 4 s long: never duplicates, never adjacent fragments
grid_calls = st.lists(st.tuples(st.integers(0, 9), st.floats(0.5, 4.0)), min_size=1, max_size=5, unique_by=lambda t: t[0]).map(
    lambda cs: [(6.0 * slot, 6.0 * slot + round(length, 2)) for slot, length in cs]
)


@settings(max_examples=120, deadline=None)
@given(grid_calls, clues_st, st.data())
def test_more_coverage_at_equal_calls_never_lowers_it(calls, clues, data):
    """Shrink one call: the same number of calls, no more coverage; unless that changes which
    calls count as useful or as drops, the coverage-and-penalties reward cannot go up (the
    footage charge, which shrinking lowers, is off here)."""
    k = data.draw(st.integers(0, len(calls) - 1))
    s, e = calls[k]
    shrunk = calls[:k] + [(s, s + (e - s) * data.draw(st.floats(0.1, 1.0)))] + calls[k + 1 :]
    ra, a = clue_seek_reward(calls, clues, 60, return_breakdown=True, irrelevant_weight=0.0)
    rb, b = clue_seek_reward(shrunk, clues, 60, return_breakdown=True, irrelevant_weight=0.0)
    assert a["coverage"] >= b["coverage"] - 1e-12
    assume(a["useful"] == b["useful"] and a["drops"] == b["drops"])
    assert ra >= rb - 1e-12


@settings(max_examples=200, deadline=None)
@given(calls_st, clues_st)
def test_agrees_with_env_evidence_state(calls, clues):
    """Gains, duplicates and adjacency are the ones the env records in its trajectories."""
    state = EvidenceState(clue_intervals=clues, duration=60.0)
    records = [state.add(s, e) for s, e in calls]
    _, b = clue_seek_reward(calls, clues, 60, return_breakdown=True)
    assert b["gains"] == pytest.approx([r.gain for r in records], abs=1e-12)
    assert b["duplicate_of"] == [r.duplicate_of for r in records]
    assert b["adjacent"] == [r.adjacent_to_previous for r in records]
    assert b["coverage"] == pytest.approx(state.coverage if records else 0.0)


# ---- zooms (the zoom tool's spatial evidence) -------------------------------------------------------
KEY = [{"time": 5.0, "boxes": {"label": [0.6, 0.6, 0.8, 0.8]}}]


def test_zoom_on_a_key_frame_box_earns_credit_and_counts_as_a_call():
    hit, miss, late = (5.5, [0.6, 0.6, 0.8, 0.8]), (5.0, [0.0, 0.0, 0.2, 0.2]), (9.0, [0.6, 0.6, 0.8, 0.8])
    r, b = clue_seek_reward([], [(4, 6)], 20, zooms=[hit, miss, late], key_frames=KEY, return_breakdown=True)
    assert (b["zooms"], b["zoom_hits"], b["calls"]) == (3, 1, 3) and r == pytest.approx(0.1)  # late: 4 s from the key frame, past the 2 s gate
    assert clue_seek_reward([], [(4, 6)], 20, zooms=[late], key_frames=KEY, zoom_time_gate=5.0) == pytest.approx(0.1)
    assert clue_seek_reward([], [(4, 6)], 20, zooms=[hit], key_frames=KEY, zoom_iou=0.99, zoom_weight=1.0) == pytest.approx(1.0)
    assert clue_seek_reward([], [(4, 6)], 20, zooms=[hit] * 5, key_frames=KEY) == pytest.approx(0.5 - 0.2)  # calls beyond three cost
    assert clue_seek_reward([], [(4, 6)], 20, zooms=[hit]) == 0.0  # no boxes: nothing to credit


def test_env_scores_a_zoom_on_the_key_frame(index_sample):
    from videoseek.envs import EnvConfig, VideoSeekEnv
    from videoseek.envs.actions import ToolCall
    from videoseek.envs.sample import VideoSample

    sample = VideoSample.model_validate({**index_sample.model_dump(), "key_frames": [{"time": 12.5, "boxes": {"flash": [0.25, 0.25, 0.75, 0.75]}}]})
    scores = {}
    for box in ([0.25, 0.25, 0.75, 0.75], [0.0, 0.0, 0.2, 0.2]):
        env = VideoSeekEnv(sample, EnvConfig(tools=["crop_video", "zoom"]))
        env.reset(seed=0)
        env.step(ToolCall("zoom", {"time": 12.5, "box": box}))
        env.step("<think>green</think><answer>B</answer>")
        call = env.trajectory.calls[0]
        scores[call.box_iou] = env.trajectory.reward_components["clue_seek"]
    assert scores == {1.0: pytest.approx(0.1), 0.0: pytest.approx(0.0)}


# ---- coverage by the frames shown (coverage_by="frames") ---------------------------------------------
FRAMES = ClueSeekParams(coverage_by="frames")


def test_frames_that_step_over_the_clue_cover_nothing():
    """A wide crop whose sparse frames miss a short clue: "span" credits coverage, "frames" none; a crop
    whose frames land in the clue scores alike under both."""
    wide, missed, hit = (0, 40), [0.0, 13.0, 26.0, 39.0], [10.0, 12.0, 14.0, 16.0]
    _, span = clue_seek_reward([wide], [(14, 15)], 60, call_frames=[missed], return_breakdown=True)
    r, seen = clue_seek_reward([wide], [(14, 15)], 60, call_frames=[missed], params=FRAMES, return_breakdown=True)
    assert span["coverage"] == 1.0 and span["useful"] == 0  # E = 1/40: no gain credit either way
    assert seen["coverage"] == 0.0 and seen["evidence"] == 0.0 and seen["irrelevant"] == span["irrelevant"]
    assert r == pytest.approx(-39 / 60)
    for params in (None, FRAMES):
        assert clue_seek_reward([(9, 17)], [(14, 15)], 60, call_frames=[hit], params=params) == pytest.approx(1 + 0.1 - 7 / 60)


def test_a_clue_seen_by_one_call_counts_where_any_call_retrieved_it():
    """Coverage counts R ∩ S: a clue part a frame lay in counts wherever the calls retrieved it; an
    unseen clue part of the same call does not."""
    clues = [(10, 12), (30, 32)]
    calls, frames = [(9, 31), (11, 13)], [[9.0, 20.0, 31.0], [11.5]]
    _, b = clue_seek_reward(calls, clues, 60, call_frames=frames, params=FRAMES, return_breakdown=True)
    # R ∪ C = [9, 32] throughout. Call 1: frame 31 lies in [30, 32] (1 s of it retrieved), none in
    # [10, 12]: E = 1/23. Call 2 (inside R) shows [10, 12], which call 1 retrieved: E = 3/23.
    assert b["gains"] == pytest.approx([1 / 23, 2 / 23])
    assert b["coverage"] == pytest.approx(3 / 4)


@settings(max_examples=200, deadline=None)
@given(calls_st, clues_st)
def test_frames_mode_without_recorded_frames_is_span_mode(calls, clues):
    """Calls whose frames were not recorded count their span: older records score as they did."""
    assert clue_seek_reward(calls, clues, 60, params=FRAMES) == pytest.approx(clue_seek_reward(calls, clues, 60), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(calls_st, clues_st, st.data())
def test_frames_never_cover_more_than_spans(calls, clues, data):
    frames = [data.draw(st.lists(st.floats(min(s, e), max(s, e)), max_size=4)) for s, e in calls]
    _, span = clue_seek_reward(calls, clues, 60, return_breakdown=True)
    _, seen = clue_seek_reward(calls, clues, 60, call_frames=frames, params=FRAMES, return_breakdown=True)
    assert seen["coverage"] <= span["coverage"] + 1e-12 and seen["evidence"] <= span["evidence"] + 1e-12


# ---- the sweep exemption (sweep_exempt) --------------------------------------------------------------
SWEEP = ClueSeekParams(sweep_exempt=True)


def test_stepping_on_past_windows_that_missed_is_no_fragment():
    """Quarter windows in order until the clue is seen: the seed's rule charges the second and third
    as a run of fragments; with `sweep_exempt` neither is one (each follows a window that found
    nothing), and the reward is 0.2 higher."""
    sweep, clue = [(0, 15), (15, 30), (30, 45)], [(35, 36)]
    r, b = clue_seek_reward(sweep, clue, 60, return_breakdown=True)
    r_ex, b_ex = clue_seek_reward(sweep, clue, 60, params=SWEEP, return_breakdown=True)
    assert (b["adjacent"], b["fragments"]) == ([False, True, True], 2)
    assert (b_ex["adjacent"], b_ex["fragments"]) == ([False, False, False], 0)
    assert r_ex - r == pytest.approx(0.2)


def test_a_call_after_one_that_found_the_clue_is_still_a_fragment():
    """Splitting the clue into adjacent pieces is what the seed penalises; the exemption keeps that."""
    for params in (None, SWEEP):
        _, b = clue_seek_reward([(10, 15), (15, 20)], CLUES, 60, params=params, return_breakdown=True)
        assert b["fragments"] == 1


def test_under_frames_coverage_a_window_whose_frames_missed_is_a_miss():
    """With coverage by the frames shown, a crop over the clue whose frames stepped over it found
    nothing: the adjacent call after it is a sweep."""
    calls, frames = [(30, 34.5), (34.5, 39)], [[30.0, 31.5, 33.0, 34.5], [35.0, 36.5, 38.0, 39.0]]
    params = ClueSeekParams(coverage_by="frames", sweep_exempt=True)
    _, b = clue_seek_reward(calls, [(33.2, 34.2), (35, 35.5)], 60, call_frames=frames, params=params, return_breakdown=True)
    assert b["adjacent"] == [False, False] and b["fragments"] == 0


@settings(max_examples=200, deadline=None)
@given(calls_st, clues_st)
def test_the_exemption_only_ever_removes_fragments(calls, clues):
    """Every other term is the seed's; a call the exemption frees was adjacent under the seed's rule."""
    r, b = clue_seek_reward(calls, clues, 60, return_breakdown=True)
    r_ex, b_ex = clue_seek_reward(calls, clues, 60, params=SWEEP, return_breakdown=True)
    assert all(a or not e for a, e in zip(b["adjacent"], b_ex["adjacent"]))
    removed = b["fragments"] - b_ex["fragments"]
    assert removed >= 0 and b_ex["fragment_term"] == pytest.approx(b["fragment_term"] + 0.1 * removed)
    others = [k for k in b if k.endswith("_term") and k != "fragment_term"]
    assert [b_ex[k] for k in others] == pytest.approx([b[k] for k in others])
    assert r - 1e-12 <= r_ex <= r + 0.1 * removed + 1e-12  # the floor can absorb part of it

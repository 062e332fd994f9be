from __future__ import annotations

import doctest
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import videoseek.envs.actions as actions_mod
import videoseek.envs.evidence as evidence_mod
from videoseek.envs.actions import Answer, CropVideo, Invalid, Think, parse_action, parse_time
from videoseek.envs.evidence import EvidenceState
from videoseek.rewards.intervals import intersection, measure, tiou, union

# ---- parser -----------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_parser_never_raises_on_any_text(text):
    assert isinstance(parse_action(text).action, (Think, CropVideo, Answer, Invalid))


fragments = st.sampled_from(["<tool_call>", "</tool_call>", "<answer>", "</answer>", "<think>", "</think>", "{", "}", '"name"', '"crop_video"',
                             '"arguments"', '"start"', '"end"', ":", ",", "12", "3.5", '"01:02"', "[", "]", "<retrieve>", "</retrieve>", "\\boxed{"])  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(fragments, max_size=30))
def test_parser_never_raises_on_tag_soup(parts):
    parse_action("".join(parts))


@pytest.mark.parametrize(
    "text,expected,repaired",
    [
        ('<tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 18.5}}</tool_call>', CropVideo(12.0, 18.5), False),
        ('<tool_call>{"name": "crop_video", "arguments": {"start": 12, "end": 18}}', CropVideo(12.0, 18.0), True),
        ("<tool_call>{'name': 'crop_video', 'arguments': {'start': 1, 'end': 2}}</tool_call>", CropVideo(1.0, 2.0), True),
        ('<tool_call>{"name": "crop_video", "arguments": {"start": 1, "end": 2,},}</tool_call>', CropVideo(1.0, 2.0), True),
        ('<tool_call>{"name": "crop_video", "arguments": "{\\"start\\": 4, \\"end\\": 9}"}</tool_call>', CropVideo(4.0, 9.0), True),
        ('<tool_call>{"name": "crop_video", "arguments": {"start_time": "1:05", "end_time": "1:10.5"}}</tool_call>', CropVideo(65.0, 70.5), True),
        ('<tool_call>{"name": "crop_video", "arguments": {"start": "00:01:05", "end": "00:01:10"}}</tool_call>', CropVideo(65.0, 70.0), False),
        ('<tool_call>{"function": {"name": "crop_video", "arguments": {"start": 1, "end": 3}}}</tool_call>', CropVideo(1.0, 3.0), True),
        ("<retrieve>12.5, 20</retrieve>", CropVideo(12.5, 20.0), True),
        ("<retrieve>0:30 to 0:45</retrieve>", CropVideo(30.0, 45.0), True),
        ("Let me check \\boxed{[3, 7.5]}", CropVideo(3.0, 7.5), True),
        ("<think>It was red.</think><answer>A</answer>", Answer("A"), False),
        ("<answer>42", Answer("42"), True),
        ("I am not sure yet.", Think(), False),
    ],
)
def test_dialects(text, expected, repaired):
    parsed = parse_action(text)
    assert parsed.action == expected
    assert bool(parsed.repairs) == repaired


def test_first_action_wins_and_the_rest_is_recorded():
    p = parse_action('<tool_call>{"name": "crop_video", "arguments": {"start": 1, "end": 2}}</tool_call><answer>B</answer>')
    assert p.action == CropVideo(1.0, 2.0) and "ignored" in p.repairs[0]


def test_tags_quoted_inside_think_do_not_act():
    p = parse_action("<think>I could write <answer>A</answer> but first</think>" '<tool_call>{"name": "crop_video", "arguments": {"start": 1, "end": 2}}</tool_call>')
    assert p.action == CropVideo(1.0, 2.0) and p.think.startswith("I could")


@pytest.mark.parametrize("value,seconds", [("1:02:03.5", 3723.5), ("02:05", 125.0), ("75:00", 4500.0), (" 7.5s ", 7.5), (3, 3.0)])
def test_parse_time(value, seconds):
    assert parse_time(value) == seconds


@pytest.mark.parametrize("value", ["inf", "nan", float("inf"), "1:99", "abc", True, None, [1], "1e999"])
def test_parse_time_rejects(value):
    assert parse_time(value) is None


def test_module_doctests():
    for mod in (actions_mod, evidence_mod):
        assert doctest.testmod(mod).failed == 0


# ---- evidence algebra -------------------------------------------------------------------------
spans = st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)).map(lambda p: (min(p), max(p))), max_size=6)


def brute_measure(intervals, step=0.01):
    """Length of a union by counting grid points (resolution `step`)."""
    grid = [i * step for i in range(int(100 / step) + 1)]
    return sum(step for x in grid if any(s <= x < e for s, e in intervals))


@settings(max_examples=60, deadline=None)
@given(spans, spans)
def test_interval_algebra_matches_brute_force(a, b):
    assert measure(a) == pytest.approx(brute_measure(a), abs=0.01 * (2 * len(a) + 1))
    inter = measure(intersection(a, b))
    assert inter <= min(measure(a), measure(b)) + 1e-9
    assert measure(a) + measure(b) - inter == pytest.approx(measure(a + b), abs=1e-6)
    assert 0.0 <= tiou(a, b) <= 1.0
    u = union(a)
    assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(u))


@settings(max_examples=100, deadline=None)
@given(spans.filter(bool), spans.filter(bool))
def test_evidence_state_properties(clues, calls):
    ev = EvidenceState(clues, duration=100.0)
    scores = [ev.score]
    for s, e in calls:
        if e - s <= 0:
            continue
        rec = ev.add(s, e)
        assert rec.score_before == pytest.approx(scores[-1])
        scores.append(ev.score)
        assert 0 <= ev.coverage <= 1 and 0 <= ev.precision <= 1 and 0 <= ev.score <= 1
    # coverage never decreases as footage accumulates; E is the tIoU of the unions.
    assert ev.score == pytest.approx(tiou(ev.retrieved, ev.clues))
    assert sum(c.gain for c in ev.calls) == pytest.approx(ev.score)


def test_duplicates_and_fragments_are_flagged():
    ev = EvidenceState([(10, 20)], duration=60)
    ev.add(10, 14)
    assert ev.add(10.2, 14.1).duplicate_of == 0
    assert ev.add(14.3, 16).adjacent_to_previous
    assert not ev.add(40, 45).adjacent_to_previous
    with pytest.raises(ValueError):
        ev.add(70, 80)


def test_the_thresholds_are_the_clue_seek_params():
    """One geometry (`rewards.clue_seek.EvidenceState`): the env's record and the reward both read
    `ClueSeekParams.duplicate_tiou` / `adjacency_gap`."""
    import videoseek.rewards as rewards
    from videoseek.rewards import ClueSeekParams, clue_seek_reward, evidence_trace

    assert EvidenceState is rewards.EvidenceState
    spans = [(10, 14), (10.5, 14.5), (14.8, 16)]  # tIoU(1, 2) = 3.5 / 4.5; a 0.3 s gap from 2 to 3
    for params, dup, adjacent in [(ClueSeekParams(), [None, 0, None], [False, False, True]),
                                  (ClueSeekParams(duplicate_tiou=0.8, adjacency_gap=0.1), [None, None, None], [False, False, False])]:  # fmt: skip
        ev = EvidenceState([(10, 20)], duration=60, params=params)
        records = [ev.add(*s) for s in spans]
        assert [r.duplicate_of for r in records] == dup and [r.adjacent_to_previous for r in records] == adjacent
        assert evidence_trace(spans, [(10, 20)], 60, params) == records
        _, b = clue_seek_reward(spans, [(10, 20)], 60, params=params, return_breakdown=True)
        assert b["duplicate_of"] == dup and b["adjacent"] == adjacent

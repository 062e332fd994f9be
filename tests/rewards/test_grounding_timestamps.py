"""Grounded thinking (Open-o3-Video) and VideoMend's timestamp reward r_ts, on hand-worked cases."""

import math

import pytest

from videoseek.envs.sample import KeyFrame
from videoseek.rewards import find_times, grounding_reward, parse_span, parse_time, timestamp_checks, timestamp_reward

KF = [KeyFrame(time=10.0, boxes={"dog": [0.0, 0.0, 0.5, 0.5]}), KeyFrame(time=30.0, boxes={"ball": [0.5, 0.5, 1.0, 1.0]})]


def test_grounding_exact_citation_scores_one():
    text = "<obj>dog</obj><box>[0.0, 0.0, 0.5, 0.5]</box>at<t>10.0</t>s and <obj>Ball</obj><box>[0.5,0.5,1,1]</box> at <t>30</t>s"
    assert grounding_reward(text, KF) == 1.0


def test_grounding_hand_worked_partial():
    # cited times 11 and 26 lie 1 s and 4 s from the nearest key frames: exp(-1/8), exp(-16/8);
    # the cited dog box is the top half of the true box: IoU = (0.5*0.25) / (0.5*0.5)
    text = "<obj>dog</obj><box>[0.0, 0.0, 0.5, 0.25]</box>at<t>11</t>s then <t>26</t>"
    temporal = (math.exp(-1 / 8) + math.exp(-16 / 8)) / 2
    spatial = 0.125 / 0.25  # intersection 0.5*0.25, union 0.25
    r, b = grounding_reward(text, KF, return_breakdown=True)
    assert b["temporal"] == pytest.approx(temporal) and b["spatial"] == pytest.approx(spatial)
    assert r == pytest.approx(0.5 * temporal + 0.5 * spatial)


def test_grounding_box_at_the_wrong_moment_or_object_earns_nothing():
    far = "<obj>dog</obj><box>[0.0, 0.0, 0.5, 0.5]</box>at<t>20</t>s"  # 10 s from the dog's key frame
    assert grounding_reward(far, KF, return_breakdown=True)[1]["spatial"] == 0.0
    unknown = "<obj>cat</obj><box>[0.0, 0.0, 0.5, 0.5]</box>at<t>10</t>s"
    assert grounding_reward(unknown, KF, return_breakdown=True)[1]["spatial"] == 0.0


def test_grounding_pixel_boxes_need_the_image_size():
    text = "<obj>dog</obj><box>[0, 0, 320, 240]</box>at<t>10</t>s"
    assert grounding_reward(text, KF, return_breakdown=True)[1]["spatial"] == 0.0
    assert grounding_reward(text, KF, image_size=(640, 480)) == 1.0


def test_grounding_without_citations_or_annotations_is_zero():
    assert grounding_reward("the dog runs", KF) == 0.0
    assert grounding_reward("<t>10</t>", []) == 0.0
    assert grounding_reward("<t>10</t>", [{"time": 10.0, "boxes": {}}]) == 1.0  # no boxes: temporal term only


@pytest.mark.parametrize(
    "text,seconds", [("00:01:05.5", 65.5), ("1:05", 65.0), ("75:30", 4530.0), ("12.5", 12.5), ("12.5s", 12.5), ("3 seconds", 3.0),
                     ("1:60", None), ("01:60:00", None), ("abc", None), ("", None), ("1:2:3:4", None)],
)  # fmt: skip
def test_parse_time(text, seconds):
    assert parse_time(text) == seconds


def test_anchored_patterns_never_match_inside_longer_times():
    assert find_times("at 01:30:45 the dog", colon_only=True) == [5445.0]  # not 1:30 nor 30:45
    assert find_times("v1.5 and 12:34:56.7 and 2.5") == [45296.7, 2.5]
    assert find_times("version 1.2.3") == []


@pytest.mark.parametrize(
    "text,span",
    [("from 1 to 5", (1.0, 5.0)), ("[00:10, 00:20]", (10.0, 20.0)), ("between 2.5s and 7s", (2.5, 7.0)), ("00:00:01 - 00:00:04", (1.0, 4.0)), ("nothing", None)],
)
def test_parse_span(text, span):
    assert parse_span(text) == span


def test_timestamp_reward_three_checks():
    good = "<time>00:00:01</time> ... <time_range>00:00:01 - 00:00:04</time_range> ... <time>00:00:04</time>"
    assert timestamp_reward(good, duration=5) == 1.0
    back = "<time>00:00:04</time> <time>00:00:02</time>"  # one of one pairs goes back
    assert timestamp_checks(back, 5) == {"parseable": 1.0, "monotonic": 0.0, "within": 1.0, "count": 2.0}
    assert timestamp_reward(back, 5) == pytest.approx(2 / 3)
    beyond = "<time>00:00:01</time> <time>00:00:09</time>"
    assert timestamp_reward(beyond, 5) == pytest.approx((1 + 1 + 0.5) / 3)
    broken = "<time>soon</time> <time>00:00:02</time>"
    assert timestamp_checks(broken, 5)["parseable"] == 0.5
    assert timestamp_reward("no time here", 5) == 0.0


def test_timestamp_reward_falls_back_to_clock_times_in_free_text():
    assert timestamp_reward("The door opens at 00:01 and closes at 00:03.", duration=10) == 1.0
    assert timestamp_reward("The door opens at 00:05 and closes at 00:03.", duration=4) == pytest.approx((1 + 0 + 0.5) / 3)

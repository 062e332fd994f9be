"""Binary think/answer format and VideoMend's Ref-Delta format F1–F5."""

import pytest

from videoseek.rewards import format_reward, ref_delta_format_reward

GOOD = "<think>The ball is blue at 3 s.</think>\n<answer>B</answer>"
TOOL = '<think>need a closer look</think><tool_call>{"name": "crop_video", "arguments": {"start": 1, "end": 4}}</tool_call>'


@pytest.mark.parametrize(
    "text",
    [GOOD, GOOD + "<|im_end|>", [TOOL, GOOD], [TOOL, "<think>just thinking</think>", GOOD], TOOL + "<tool_response>frames</tool_response>" + GOOD],
)
def test_format_accepts_think_then_one_answer_after_tool_turns(text):
    assert format_reward(text) == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "<answer>B</answer>",
        "<think>x</think>",
        "B",
        "<think>x</think><answer>B</answer><answer>C</answer>",
        "<answer>B</answer><think>x</think>",
        "<think>x</think> trailing words <answer>B</answer>",
        "<think>x</think><answer>B</answer> more",
        "<think>x<think>y</think></think><answer>B</answer>",
        [GOOD.replace("B", "A"), GOOD],  # an earlier turn already answered
        [],
        "",
    ],
)
def test_format_rejects_everything_else(text):
    assert format_reward(text) == 0.0


REF_DELTA = (
    "<think>Reference frame at <time>00:00:00.5</time>: a person stands by an open door.\n"
    "From <time_range>00:00:00.5 - 00:00:12.9</time_range>, <delta>the person sweeps; the door stays open</delta>.\n"
    "Reference frame at <time>00:00:12.9</time>: the person reaches for the handle.\n"
    "Reasoning Summary: the door goes from open to closed.</think><answer>A</answer>"
)


def test_ref_delta_full_structure_scores_one():
    reward, parts = ref_delta_format_reward(REF_DELTA, return_breakdown=True)
    assert reward == 1.0 and set(parts.values()) == {1.0}


@pytest.mark.parametrize(
    "mutation,missing",
    [
        (lambda t: t.replace("<answer>A</answer>", "<answer> </answer>"), {"F2"}),
        (lambda t: t.replace("<time>00:00:00.5</time>", "00:00:00.5").replace("<time>00:00:12.9</time>", "x"), {"F3"}),
        (lambda t: t.replace("<delta>", "").replace("</delta>", ""), {"F4"}),
        (lambda t: t.replace("Reasoning Summary:", "So"), {"F5"}),
        (lambda t: t.replace("<think>", "").replace("</think>", ""), {"F1", "F3", "F4", "F5"}),
    ],
)
def test_ref_delta_each_check_drops_its_weight(mutation, missing):
    weights = {"F1": 0.15, "F2": 0.15, "F3": 0.25, "F4": 0.25, "F5": 0.20}
    reward, parts = ref_delta_format_reward(mutation(REF_DELTA), return_breakdown=True)
    assert {k for k, v in parts.items() if v == 0.0} == missing
    assert reward == pytest.approx(1.0 - sum(weights[k] for k in missing))


def test_ref_delta_summary_must_close_the_chain():
    early = REF_DELTA.replace("Reasoning Summary: the door goes from open to closed.", "").replace("<think>", "<think>Reasoning Summary: guess. ")
    assert ref_delta_format_reward(early, return_breakdown=True)[1]["F5"] == 0.0

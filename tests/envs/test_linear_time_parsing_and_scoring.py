"""Parsing and scoring any action text take time linear in its length (issue 13, hardening item 2).

Each adversarial text is timed at about n and 10n characters: the longer one may cost at most
15x (a quadratic regex costs ~100x, a cubic one ~1000x; before the fixes `\\boxed{[` and 4 KB of
spaces took 33 s and the dmgrpo preset on a 300k-character think over 30 s). Timings are the
minimum over interleaved repeats (up to 9, fewer once the ratio holds) of this process's CPU
time over runs long enough to time, caches keyed by the text are cleared before each call, and a run that takes far too long
is interrupted instead of hanging the suite.
"""

from __future__ import annotations

import signal
import time

import pytest

from videoseek.envs.actions import parse_action
from videoseek.envs.sample import VideoSample
from videoseek.rewards import PRESETS, EpisodeSummary, RewardConfig, accuracy_reward, score_group
from videoseek.rewards import process as process_module

N = 2000  # characters of the short input; the long one has 10x as many
MAX_RATIO = 15.0


def T(body: str) -> str:
    """A final turn whose think block is `body`."""
    return "<think>" + body + "</think><answer>B</answer>"


def rep(piece: str, n: int) -> str:
    return piece * max(1, n // len(piece))


# Action texts aimed at the parser's patterns (envs/actions.py).
PARSE_CASES = {
    "boxed_then_spaces": lambda n: "\\boxed{[" + " " * n,
    "boxed_without_closing": lambda n: rep("\\boxed{[1,", n) + "]x",
    "boxed_spaces_inside": lambda n: "\\boxed{[ 1" + " " * n + ", 2 ]x",
    "unclosed_retrieve": lambda n: rep("<retrieve>", n),
    "retrieve_spaces": lambda n: "<retrieve>1" + " " * n + "x -" + " " * n + "</retrieve>",
    "unclosed_tool_call": lambda n: rep("<tool_call>", n),
    "fence_then_spaces": lambda n: "<tool_call>```x" + " " * n + "y</tool_call>",
    "commas_and_spaces": lambda n: "<tool_call>{" + rep(",  ", n) + "</tool_call>",
    "nested_braces": lambda n: "<tool_call>" + rep("{", n),
    "nested_lists": lambda n: '<tool_call>{"name": "crop_video", "arguments": ' + rep("[", n) + "}</tool_call>",
    "answer_then_spaces": lambda n: "<answer>x" + " " * n,
}

# Final turns aimed at the reward patterns (rewards/*.py); scored by every preset.
SCORE_CASES = {
    "unclosed_think": lambda n: rep("<think>", n),
    "unclosed_answer": lambda n: rep("<answer>", n),
    "untagged_think": lambda n: T(rep("x", n)),
    "unclosed_time": lambda n: T(rep("<time>", n)),
    "unclosed_time_range": lambda n: T(rep("<time_range>", n)),
    "unclosed_delta": lambda n: T(rep("<time_range>1</time_range><delta>x", n)),
    "unclosed_step": lambda n: T(rep("<step>", n)),
    "unclosed_t": lambda n: T(rep("<t>", n)),
    "unclosed_obj": lambda n: T(rep("<obj>a</obj>", n)),
    "summary_then_spaces": lambda n: T("<time>1</time>Reasoning Summary" + " " * n),
    "terminator_run": lambda n: T(rep(".", n) + "x"),
    "abbreviations": lambda n: T(rep("Dr. ", n)),
    "time_spaces": lambda n: T("<time>1" + " " * n + "x</time>"),
    "range_spaces": lambda n: T("<time_range>1" + " " * n + "x</time_range>"),
    "obj_spaces": lambda n: T("<obj>" + " " * n + "x"),
    "box_spaces": lambda n: T("<obj>a</obj><box>" + " " * n + "x"),
    "box_then_spaces": lambda n: T("<obj>a</obj><box>[0.1,0.2,0.3,0.4]" + " " * n + "x"),
    "answer_lead_spaces": lambda n: "<think>a</think><answer>answer" + " " * n + "xy</answer>",
    "answer_inner_spaces": lambda n: "<think>a</think><answer>x" + " " * n + "y</answer>",
    "one_long_step_many_short": lambda n: T(rep("a ", n // 2) + "\n" + rep("b.\n", n // 2)),
    "answer_number_spaces": lambda n: "<think>a</think><answer>from 1" + " " * n + "x</answer>",
    "colon_runs": lambda n: T(rep("12:", n)),
    "dotted_numbers": lambda n: T(rep("1.", n)),
    "sentences": lambda n: T(rep("The ball is blue at 00:00:05. ", n)),
    "digits": lambda n: T(rep("1", n)),
}

SAMPLE = VideoSample(
    id="mc", video="v.mp4", question="q", options=["A. red", "B. blue", "C. green"], answer="B", duration=30.0,
    clue_intervals=[(3.0, 9.0)], reference_reasoning="The ball is blue. It rolls to the left.",
    key_frames=[{"time": 5.0, "boxes": {"ball": [0.1, 0.1, 0.3, 0.3]}}],
    mask_patterns=[{"time_range": (3.0, 5.0), "oracle_correct": True}],
)  # fmt: skip
TYPED = [
    VideoSample(id=t, video="v.mp4", question="q", answer=a, problem_type=t, duration=30.0)
    for t, a in (("temporal_grounding", "from 3 to 9"), ("numerical", "12"), ("ocr", "a b c"), ("free_form", "a blue ball"), ("regression", "3.5"))
]


class _TooSlow(Exception):
    pass


def _interrupt(signum, frame):
    raise _TooSlow()


def _run(fn, loops: int, budget: float = 30.0) -> float:
    """Seconds per call over `loops` calls of `fn` (text-keyed caches cleared first); _TooSlow past `budget`."""
    old = signal.signal(signal.SIGALRM, _interrupt)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        total = 0.0
        for _ in range(loops):
            process_module._cached_features.cache_clear()
            process_module._cached_reference.cache_clear()
            t0 = time.process_time()  # CPU time: waiting for a core shared with other processes does not count
            fn()
            total += time.process_time() - t0
        return total / loops
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _loops(fn) -> int:
    """Calls per measurement so that one lasts at least 2 ms (timer and scheduler noise)."""
    loops = 1
    while _run(fn, loops) * loops < 2e-3 and loops < 256:
        loops *= 4
    return loops


def assert_linear(fn, make, what: str, n: int = N) -> None:
    short, long = make(n), make(10 * n)
    small_loops = _loops(lambda: fn(short))
    smalls: list[float] = []
    bigs: list[float] = []
    for _ in range(3):  # measurements interleaved, so a busy moment slows both; the minimum of each wins
        for _ in range(3):
            smalls.append(_run(lambda: fn(short), small_loops))
            budget = 1.0 + 2 * MAX_RATIO * min(smalls) * 4  # far past the allowed time: clearly not linear, stop
            try:
                bigs.append(_run(lambda: fn(long), max(1, small_loops // 8), budget))
            except _TooSlow:
                pytest.fail(f"{what}: {len(long)} characters took over {budget:.1f} s ({len(short)}: {min(smalls) * 1e3:.2f} ms)")
        if min(bigs) <= MAX_RATIO * min(smalls):
            return
    pytest.fail(f"{what}: 10x longer input ({len(short)} -> {len(long)} characters) cost {min(bigs) / min(smalls):.0f}x the time "
                f"({min(smalls) * 1e3:.2f} -> {min(bigs) * 1e3:.2f} ms)")  # fmt: skip


@pytest.mark.parametrize("case", sorted({**PARSE_CASES, **SCORE_CASES}))
def test_parse_action_is_linear(case):
    make = {**PARSE_CASES, **SCORE_CASES}[case]
    assert_linear(parse_action, make, f"parse_action[{case}]")


def _episode(text: str) -> EpisodeSummary:
    # The whole text is the prediction too: a policy's answer can be as long as its turn.
    return EpisodeSummary(prediction=text, assistant_turns=[text], calls=[(3.0, 9.0)], invalid_calls=0, duration=30.0)


@pytest.mark.parametrize("case", sorted(SCORE_CASES))
def test_terminal_scoring_of_every_preset_is_linear(case):
    make = SCORE_CASES[case]
    for preset in PRESETS:
        config = RewardConfig(preset=preset)

        def score(text: str) -> None:
            ep = _episode(text)
            score_group(SAMPLE, [ep], {"mask": [ep], "shuffle": [ep], "blend": [ep]}, config, perturbation={"oracle_correct": True})

        assert_linear(score, make, f"{preset}[{case}]")


@pytest.mark.parametrize("case", sorted(SCORE_CASES))
def test_accuracy_of_every_problem_type_is_linear(case):
    assert_linear(lambda text: [accuracy_reward(text, s) for s in TYPED], SCORE_CASES[case], f"accuracy[{case}]")


@pytest.mark.parametrize("case", ["unclosed_time", "unclosed_time_range", "unclosed_t", "unclosed_delta", "time_spaces", "range_spaces"])
def test_mask_candidates_of_a_reference_are_linear(case):
    from videoseek.agents.annotate_masks import anchor_ranges, ref_delta_ranges

    assert_linear(lambda text: (ref_delta_ranges(text), anchor_ranges(text)), SCORE_CASES[case], f"annotate_masks[{case}]")

"""Process Reasoning Reward (MOSS-ChatV): SDTW against brute force, PRR against the public path."""

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from videoseek.rewards import prepare_reference, process_cost_matrix, process_reward, split_steps, subsequence_dtw

SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def brute_force_sdtw(cost, k_ref, k_target):
    """Minimum over every explicit warping path of Algorithm 2, enumerated one by one.

    A path starts at any cell (0, s) of the free row 0 and moves by diagonal (1, 1),
    vertical (k, 0) with k <= k_ref, or horizontal (0, k) with k <= k_target, never entering
    row 0 again or column 0 below row 0; its cost is the sum of the visited cells of rows
    1..n, and it must end in row n. Independent of the DP recursion.
    """
    n, m = len(cost), len(cost[0])
    best = math.inf

    def walk(i, j, acc):
        nonlocal best
        if i == n:
            best = min(best, acc)
            # a path may continue along row n, but costs are non-negative so stopping is no worse
        moves = [(1, 1)] + [(k, 0) for k in range(1, k_ref + 1)] + [(0, k) for k in range(1, k_target + 1)]
        for di, dj in moves:
            ni, nj = i + di, j + dj
            if ni > n or nj > m or ni == 0 or nj == 0:
                continue
            walk(ni, nj, acc + cost[ni - 1][nj - 1])

    for s in range(m + 1):
        walk(0, s, 0.0)
    return best


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.integers(1, 3), st.integers(0, 10_000)
)
def test_sdtw_equals_brute_force_on_random_matrices(n, m, k_ref, k_target, seed):
    rng = np.random.default_rng(seed)
    cost = rng.random((n, m)).round(3)
    assert subsequence_dtw(cost, k_ref, k_target) == pytest.approx(brute_force_sdtw(cost.tolist(), k_ref, k_target), abs=1e-12)


def test_sdtw_hand_worked_jumps():
    cost = [[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.5, 0.0]]
    # classic subsequence DTW (no jumps): P1 = [0, 1, 1, 1]; P2 = [1, 1, 1.5, 1] -> 1
    assert subsequence_dtw(cost, k_ref=1, k_target=1) == 1.0
    # with k_ref = 2 a vertical jump from the free row 0 skips r1: P2[4] = 0 + P0[4] = 0
    assert subsequence_dtw(cost, k_ref=2, k_target=2) == 0.0
    # with k_target = 2 only: (1,1) -> (1,3) is a horizontal jump costing C[1,3] = 1; the best is still 1
    assert subsequence_dtw(cost, k_ref=1, k_target=2) == 1.0
    # a subsequence may start anywhere in the target: a perfect match in the middle costs 0
    assert subsequence_dtw([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], k_ref=1, k_target=1) == 0.0
    assert subsequence_dtw(np.zeros((0, 3))) == 0.0 and subsequence_dtw(np.zeros((2, 0))) == math.inf


def test_sdtw_rejects_bad_input():
    with pytest.raises(ValueError, match="cost"):
        subsequence_dtw([1.0, 2.0])
    with pytest.raises(ValueError, match="k_ref"):
        subsequence_dtw([[1.0]], k_ref=0)


def public_path_prr(generated, reference, alpha=1.0):
    """rouge-score per pair + the brute-force SDTW: how public code would compute PRR."""
    g, r = split_steps(generated), split_steps(reference)
    cost = []
    for ref in r:
        row = []
        for gen in g:
            s = SCORER.score(ref, gen)
            row.append(1 - (s["rouge1"].fmeasure + s["rouge2"].fmeasure + s["rougeL"].fmeasure) / 3)
        cost.append(row)
    return math.exp(-alpha * brute_force_sdtw(cost, 2, 2))


SENTENCES = [
    "The man picks up the red cup at 00:00:03.5.", "He drinks from it slowly.", "Then he puts it down on the table.",
    "A dog runs into the kitchen.", "The door is opened by the woman.", "She closes the door again.",
    "The ball rolls 2.5 m to the left.", "Therefore the answer is B.",
]


def test_prr_equals_public_path_on_random_traces():
    rng = random.Random(0)
    for _ in range(12):
        ref = " ".join(rng.sample(SENTENCES, 3))
        gen = " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(1, 4)))
        assert abs(process_reward(gen, ref) - public_path_prr(gen, ref)) < 1e-12


def test_prr_hand_worked_value():
    # r1 = g1 exactly (cost 0); "He walks out." shares no token with either generated step (cost 1),
    # so every path ends on a row-2 cell of cost 1: D = 1 and PRR = exp(-alpha)
    ref = "The man opens the door. He walks out."
    gen = "The man opens the door. Birds sing."
    assert process_cost_matrix(gen, ref).tolist() == [[0.0, 1.0], [1.0, 1.0]]
    assert process_reward(gen, ref) == math.exp(-1.0)
    assert process_reward(gen, ref, alpha=0.5) == math.exp(-0.5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=6), st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=8))
def test_prr_bounds_and_self_alignment_is_the_maximum(ref_steps, gen_steps):
    ref, gen = " ".join(ref_steps), " ".join(gen_steps)
    r = process_reward(gen, ref)
    assert 0.0 <= r <= 1.0
    assert process_reward(ref, ref) == 1.0 >= r


def test_prr_empty_sides_and_tags():
    assert process_reward("", "A step.") == 0.0
    assert process_reward("A step.", "") == 0.0
    assert process_reward("...", "A step.") == 0.0
    tagged = "<think><step>The man opens the door.</step><step>He walks out.</step></think><answer>A</answer>"
    assert process_reward(tagged, "The man opens the door. He walks out.") == 1.0


def test_prepared_reference_is_reused_and_gives_the_same_values():
    ref = " ".join(SENTENCES[:5])
    prepared = prepare_reference(ref)
    assert prepare_reference(ref) is prepared  # memoised by text: one preparation per group
    for gen in (SENTENCES[0], " ".join(SENTENCES[2:6]), " ".join(reversed(SENTENCES))):
        assert process_reward(gen, prepared) == process_reward(gen, ref) == process_reward(gen, split_steps(ref))


def test_normalized_distance_divides_by_reference_steps():
    ref, gen = " ".join(SENTENCES[:4]), "Unrelated words only here."
    _, info = process_reward(gen, ref, return_breakdown=True)
    assert process_reward(gen, ref, normalize=True) == pytest.approx(math.exp(-info["distance"] / 4))

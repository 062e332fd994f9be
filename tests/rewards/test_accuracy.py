"""Accuracy by problem type (Video-R1 rules), checked on hand-worked cases and against rouge-score."""

from types import SimpleNamespace

import pytest
from rouge_score import rouge_scorer

from videoseek.envs.sample import VideoSample
from videoseek.rewards import accuracy_reward, extract_choice, word_error_rate


def sample(problem_type, answer, options=None, **kw):
    return VideoSample(id="s", video="v.mp4", question="q?", options=options, answer=answer, problem_type=problem_type, **kw)


MC = sample("multiple_choice", "B", ["A. red", "B. blue", "C. green", "D. black"])


@pytest.mark.parametrize("text", ["B", "(B)", "B. blue", "B) blue", "b", "[B]", "B: blue", "Answer: B", "The answer is B.", "Option B", "blue", "Blue.", "<answer>B</answer>"])
def test_multiple_choice_accepts_the_ways_a_letter_is_written(text):
    assert accuracy_reward(text, MC) == 1.0


@pytest.mark.parametrize("text", ["A", "(C)", "D. black", "red", "E", "", "B or C", "Both"])
def test_multiple_choice_rejects_other_letters_and_noise(text):
    assert accuracy_reward(text, MC) == 0.0


def test_multiple_choice_letter_outside_options_is_not_a_choice():
    assert extract_choice("E", ["A. x", "B. y"]) is None
    assert extract_choice("a dog", None) is None


def test_missing_prediction_scores_zero():
    assert accuracy_reward(None, MC) == 0.0


@pytest.mark.parametrize(
    "pred,answer,expected",
    [("3.14", "3.14159", 1.0), ("3.15", "3.14159", 0.0), ("1,234", "1234", 1.0), ("42 meters", "42", 1.0), ("-2.005", "-2.0", 1.0), ("7", "8", 0.0), ("3 or 4", "3", 0.0), ("nan", "3", 0.0)],
)
def test_numerical_rounds_to_two_decimals(pred, answer, expected):
    assert accuracy_reward(pred, sample("numerical", answer)) == expected


def test_numerical_strict_decimal_matches_video_r1():
    s = sample("numerical", "3.0")
    assert accuracy_reward("3", s) == 1.0
    assert accuracy_reward("3", s, strict_decimal=True) == 0.0


def test_ocr_is_one_minus_word_error_rate():
    s = sample("ocr", "EXIT ONLY NO PARKING")
    assert accuracy_reward("EXIT ONLY NO PARKING", s) == 1.0
    assert accuracy_reward("EXIT ONLY PARKING", s) == pytest.approx(0.75)  # one deletion of 4 words
    assert accuracy_reward("a b c d e f g h i", s) == 0.0  # WER above 1 clips to 0
    assert word_error_rate("", "x") == 1.0  # Video-R1 divides by max(1, |ref|)


def test_free_form_equals_mean_rouge_of_rouge_score_package():
    ref, pred = "The man opens the door and walks out.", "A man opened a door, then walked outside."
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    s = scorer.score(ref, pred)
    expected = (s["rouge1"].fmeasure + s["rouge2"].fmeasure + s["rougeL"].fmeasure) / 3
    assert accuracy_reward(pred, sample("free_form", ref)) == expected
    assert 0 < expected < 1


@pytest.mark.parametrize("pred,expected", [("10", 1.0), ("9", 0.9), ("12.5", 0.75), ("25", 0.0), ("-10", 0.0), ("ten", 0.0)])
def test_regression_is_one_minus_clipped_relative_error(pred, expected):
    assert accuracy_reward(pred, sample("regression", "10")) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    "pred,expected",
    [("from 4 to 8", 1.0), ("[2, 6]", 2 / 6), ("00:00:06 - 00:00:10", 2 / 6), ("from 10 to 12 seconds", 0.0), ("[8, 4]", 0.0), ("no idea", 0.0)],
)
def test_temporal_grounding_is_tiou(pred, expected):
    assert accuracy_reward(pred, sample("temporal_grounding", "from 4.0 to 8.0 seconds")) == pytest.approx(expected)


def test_duck_typed_sample_and_aliases():
    s = SimpleNamespace(problem_type="multiple choice", answer="C", options=["A. x", "B. y", "C. z"])
    assert accuracy_reward("C. z", s) == 1.0
    assert accuracy_reward("3.0", SimpleNamespace(problem_type="OCR", answer="3.0", options=None)) == 1.0


def test_unknown_problem_type_names_the_field():
    with pytest.raises(ValueError, match="problem_type"):
        accuracy_reward("x", SimpleNamespace(problem_type="essay", answer="x", options=None))

"""Sentence-step splitting: decimals, abbreviations and timestamps stay whole; <step> tags win."""

import pytest

from videoseek.rewards.steps import split_sentences, split_steps

# (text, expected sentences) labelled by hand
LABELLED = [
    ("The cup is 3.5 cm from the edge. Then it falls.", ["The cup is 3.5 cm from the edge.", "Then it falls."]),
    ("At 00:01:02.5 the door opens. At 00:01:05 it closes.", ["At 00:01:02.5 the door opens.", "At 00:01:05 it closes."]),
    ("Dr. Smith enters at 1:30. He sits.", ["Dr. Smith enters at 1:30.", "He sits."]),
    ("The man, i.e. the chef, cuts it. He stops.", ["The man, i.e. the chef, cuts it.", "He stops."]),
    ("Objects, e.g. Cups and plates, fall. Done.", ["Objects, e.g. Cups and plates, fall.", "Done."]),
    ("It costs approx. 5 dollars. Next.", ["It costs approx. 5 dollars.", "Next."]),
    ("See Fig. 3 for details. OK.", ["See Fig. 3 for details.", "OK."]),
    ("The answer is no. Then he leaves.", ["The answer is no.", "Then he leaves."]),
    ("Player No. 7 scores. The crowd cheers!", ["Player No. 7 scores.", "The crowd cheers!"]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ("Is it moving? Yes! It moves left.", ["Is it moving?", "Yes!", "It moves left."]),
    ("J. Smith waves. The car stops.", ["J. Smith waves.", "The car stops."]),
    ("The U.S. team wins. Fans cheer.", ["The U.S. team wins.", "Fans cheer."]),
    ("Speed is 2.5x. It accelerates vs. the start. Fine.", ["Speed is 2.5x.", "It accelerates vs. the start.", "Fine."]),
    ("first line without period\nsecond line.", ["first line without period", "second line."]),
    ("门打开了。然后关上了！", ["门打开了。", "然后关上了！"]),
    ("Ratio 3.14. Next step at 12.5 s. Done", ["Ratio 3.14.", "Next step at 12.5 s.", "Done"]),
    ("Wait... Then what?", ["Wait...", "Then what?"]),
    ("...", []),
    ("", []),
]


@pytest.mark.parametrize("text,expected", LABELLED)
def test_regex_splitter_on_labelled_cases(text, expected):
    assert split_sentences(text) == expected


def test_pysbd_runs_offline_and_keeps_decimals_and_times_whole():
    text = "At 00:01:02.5 the cup is 3.5 cm away. Then it falls."
    assert split_sentences(text, method="pysbd") == ["At 00:01:02.5 the cup is 3.5 cm away.", "Then it falls."]


def test_unknown_method_is_a_one_line_error():
    with pytest.raises(ValueError, match="method"):
        split_sentences("x", method="punkt")


def test_step_tags_take_precedence_and_only_think_counts():
    resp = "<think><step>Look at 1.5 s. The cup moves.</step><step>So B.</step></think><answer>B. it moves</answer>"
    assert split_steps(resp) == ["Look at 1.5 s. The cup moves.", "So B."]
    assert split_steps("<think>One. Two.</think><answer>Three.</answer>") == ["One.", "Two."]
    assert split_steps("No tags. Plain text.") == ["No tags.", "Plain text."]

"""Search and reading apart (`videoseek.envs.metrics.clue_shown`, `shown_rate`, `reading_by_answer`): did a frame the policy
was shown lie in a clue interval? Checked on real decoded videos of the flash curriculum with the
scripted searchers `make learn` trains from, against where each video's flash is."""

from __future__ import annotations

import pytest

from videoseek.agents.evaluate import summarize
from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import SCRIPTED
from videoseek.envs.env import EnvConfig
from videoseek.envs.metrics import clue_shown, reading_by_answer, shown_rate
from videoseek.envs.synth import generate_dataset

# make learn's env: 4 frames over a quarter window (10 s video) are 0.625 s apart, so a 1 s flash
# inside a cropped window always lands on one of them
ENV = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=6, max_total_frames=24, max_pixels=112 * 112)


@pytest.fixture(scope="module")
def hasty_episodes(tmp_path_factory):
    out = tmp_path_factory.mktemp("curriculum")
    samples = generate_dataset(out, n=8, seed=3, kinds=["flash_colour"], min_duration=10, max_duration=10, avoid_uniform=(4,))
    return run_rollouts(samples, SCRIPTED["sweep-hasty"](), env_config=ENV, out_dir=out / "run", progress=False)


def test_the_hasty_searcher_is_shown_the_flash_only_within_its_two_windows(hasty_episodes):
    """The hasty searcher crops the first two quarter windows, (0, 2.5) and (2.5, 5), and answers:
    the flash is shown when it begins inside them, and never otherwise (the initial frames avoid it)."""
    inside = [clue_shown(t) for t in hasty_episodes if t.clue_intervals[0][0] < 5.0 - 0.7]
    beyond = [clue_shown(t) for t in hasty_episodes if t.clue_intervals[0][0] >= 5.0]
    assert inside and beyond, "the curriculum puts flashes on both sides of 5 s"
    assert all(inside) and not any(beyond)


def test_the_rate_splits_accuracy_into_search_and_reading(hasty_episodes):
    shown = [t for t in hasty_episodes if clue_shown(t)]
    rate = shown_rate(hasty_episodes)
    assert rate["shown_n"] == len(hasty_episodes) and rate["shown"] == len(shown) / len(hasty_episodes)
    assert rate["accuracy_shown"] == 1.0  # the scripted searcher reads the colour it was shown
    unshown = [t for t in hasty_episodes if not clue_shown(t)]
    assert rate["accuracy_unshown"] == sum(float(t.accuracy) for t in unshown) / len(unshown)
    assert summarize(hasty_episodes)["clue_shown"] == {
        "shown": rate["shown"], "accuracy_shown": 1.0, "accuracy_unshown": rate["accuracy_unshown"], "n": len(hasty_episodes),
        "by_answer": reading_by_answer(hasty_episodes)}


def test_reading_by_answer_shows_which_options_a_reader_confuses(hasty_episodes):
    shown = [t for t in hasty_episodes if clue_shown(t)]
    rows = reading_by_answer(hasty_episodes)
    assert sum(row["n"] for row in rows.values()) == len(shown)  # only where the flash was shown
    # the scripted searcher names every colour it was shown: each answer's predictions are itself
    assert rows and all(row["accuracy"] == 1.0 and row["predictions"] == {answer: row["n"]} for answer, row in rows.items())
    # a reader that gives another option for one answer (GRPO's blue for purple): only that row moves
    target = shown[0].answer
    other = next(o.split(".")[0] for o in shown[0].options if not o.startswith(target + "."))
    confused = [t.model_copy(update={"prediction": other, "accuracy": 0.0}) if t.answer == target else t for t in hasty_episodes]
    moved = reading_by_answer(confused)
    assert moved[target] == {"n": rows[target]["n"], "accuracy": 0.0, "predictions": {other: rows[target]["n"]}}
    assert {a: row for a, row in moved.items() if a != target} == {a: row for a, row in rows.items() if a != target}
    # text outside the option letters, and no prediction
    garbled = [shown[0].model_copy(update={"prediction": "Not in that window.</think>\n<answer>E", "accuracy": 0.0}),
               shown[0].model_copy(update={"prediction": None, "accuracy": 0.0})]
    assert reading_by_answer(garbled) == {target: {"n": 2, "accuracy": 0.0, "predictions": {"none": 1, "other": 1}}}
    assert reading_by_answer([shown[0].model_copy(update={"options": None})]) == {}  # open-ended: not counted
    # a prediction names its option as the accuracy scorer reads it: "(X)" and the option's text are X
    written = [shown[0].model_copy(update={"prediction": f"({other})", "accuracy": 0.0}),
               shown[0].model_copy(update={"prediction": next(o for o in shown[0].options if o.startswith(other + ".")).split(". ", 1)[1], "accuracy": 0.0})]
    assert reading_by_answer(written) == {target: {"n": 2, "accuracy": 0.0, "predictions": {other: 2}}}


def test_masked_frames_show_nothing_and_unscorable_episodes_are_not_counted(hasty_episodes):
    shown = next(t for t in hasty_episodes if clue_shown(t))
    masked = shown.model_copy(deep=True)
    for frame in [*masked.initial.frames, *(f for turn in masked.turns for f in turn.observation.frames)]:
        frame.masked = True
    assert clue_shown(masked) is False
    assert clue_shown(shown.model_copy(update={"clue_intervals": []})) is None
    assert clue_shown(shown.model_copy(update={"failure": "policy error"})) is None
    assert shown_rate([shown.model_copy(update={"clue_intervals": []})]) == {"shown_n": 0.0}

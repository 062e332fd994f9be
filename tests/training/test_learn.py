"""The `make learn` pieces that run fast: the flash_colour curriculum, the searchers whose traces
SFT learns from, and the summary (metrics, paired intervals, checks, curves) `training/learn.py`
writes. The full pipeline is a benchmark (`make learn`), not a test."""

from __future__ import annotations

import json

import numpy as np
import pytest

from videoseek.agents.evaluate import episode_metrics, mean_interval
from videoseek.agents.rollout import run_rollouts
from videoseek.envs.trajectory import read_trajectories
from videoseek.agents.scripted import SCRIPTED
from videoseek.viewer.episode import episode_view
from videoseek.envs import perceive as perceive_module
from videoseek.envs.env import EnvConfig
from videoseek.envs.synth import PALETTE, generate_dataset
from videoseek.envs.video import open_video

ENV = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=6, max_total_frames=24, max_pixels=112 * 112)


@pytest.fixture(scope="module")
def curriculum(tmp_path_factory):
    out = tmp_path_factory.mktemp("curriculum")
    return generate_dataset(out, n=6, seed=3, kinds=["flash_colour"], min_duration=10, max_duration=10, avoid_uniform=(4,))


def test_flash_colour_is_seen_only_by_seeking(curriculum):
    for s in curriculum:
        assert s.options == [f"{'ABCDE'[k]}. {c}" for k, c in enumerate(PALETTE)]  # one fixed order
        video = open_video(s.video)
        sparse, _ = video.frames_by_index(video.indices_at((np.arange(4) + 0.5) * s.duration / 4))
        assert int((perceive_module.chroma(sparse) >= perceive_module.MIN_CHROMA).sum()) == 0, s.id
        (a, b), = s.clue_intervals
        clue, times = video.frames_by_index(video.indices_at(np.linspace(a + 0.05, b - 0.05, 3)))
        assert perceive_module.perceive(s, clue, times) == s.answer, s.id


@pytest.mark.parametrize("name", ["sweep", "sweep-shuffled", "oracle-brief"])
def test_searchers_find_the_flash_and_answer_right(curriculum, name, tmp_path):
    trajs = run_rollouts(curriculum, SCRIPTED[name](), env_config=ENV, out_dir=tmp_path, progress=False)
    assert all(t.correct for t in trajs), [t.sample_id for t in trajs if not t.correct]
    assert all(episode_metrics(t)["valid_format"] == 1.0 for t in trajs)
    if name != "oracle-brief":  # a searcher's last crop is the window that showed the flash
        for t in trajs:
            *_, last_crop, answer = [turn for turn in t.turns]
            (a, b), = t.clue_intervals
            assert last_crop.call.start < b and a < last_crop.call.end
    if name == "sweep-shuffled":  # some first crops miss, and a later one corrects them
        assert any(len(t.turns) > 2 for t in trajs)


def test_the_hasty_searcher_gives_up_after_two_windows_and_guesses(curriculum, tmp_path):
    trajs = run_rollouts(curriculum, SCRIPTED["sweep-hasty"](), env_config=ENV, out_dir=tmp_path, progress=False)
    outcomes = set()
    for t in trajs:
        crops = [(turn.call.start, turn.call.end) for turn in t.turns if turn.call is not None]
        assert crops == [(0.0, 2.5), (2.5, 5.0)][: len(crops)], crops  # quarter windows in order, two at most
        (a, b), = t.clue_intervals
        if any(a <= f.t <= b for turn in t.turns for f in turn.observation.frames):  # its frames show the flash: it reads it
            assert t.correct and crops[-1][0] < b and a < crops[-1][1], t.sample_id
            outcomes.add("read")
        else:  # it stops looking where the flash has not shown yet and guesses
            assert len(crops) == 2 and "did not see it" in t.turns[-1].assistant, t.sample_id
            outcomes.add("gave up")
    assert outcomes == {"read", "gave up"}


def test_the_look_on_probe_misses_twice_then_hands_over(curriculum, tmp_path):
    """The look-on start (`run_rollouts(look_on_share=1)`, `rollout --look-on-probe`): two quarter-window
    crops that overlap no clue, marked forced, then the policy decides; every episode is then counted by
    `look_on`: the hasty teacher never looks on, the sweep always does."""
    from videoseek.envs.metrics import look_on, look_on_rate

    for name, expected in (("sweep-hasty", False), ("sweep", True)):
        trajs = run_rollouts(curriculum, SCRIPTED[name](), env_config=ENV, out_dir=tmp_path / name, progress=False, look_on_share=1.0)
        for t in trajs:
            (a, b), = t.clue_intervals
            first, second = (turn.call for turn in t.turns[:2])
            assert first is not None and second is not None
            assert all(c.end <= a or c.start >= b for c in (first, second)), (t.sample_id, a, b)  # both miss the flash
            assert t.turns[1].evidence["coverage"] == 0.0 and look_on(t) is expected
            assert [turn.forced for turn in t.turns] == [True, True] + [False] * (len(t.turns) - 2)
        raw = json.loads((tmp_path / name / "trajectories.jsonl").read_text().splitlines()[0])
        view = episode_view(raw, tmp_path / name, str)  # the viewer marks the start's turns
        assert [turn["forced"] for turn in view["turns"]][:3] == [True, True, False]
        assert look_on_rate(trajs) == {"look_on": float(expected), "look_on_n": float(len(curriculum))}


def test_summary_pairs_stages_by_sample_and_checks_the_claims(curriculum, tmp_path):
    from videoseek.training import learn

    stages = {"base": "no-tool", "sft": "sweep", "grpo": "oracle-brief", "no-tool": "no-tool", "oracle": "oracle",
              "sft-sampled": "sweep-shuffled", "grpo-sampled": "oracle", "sft-probe": "sweep-hasty", "grpo-probe": "sweep"}  # fmt: skip
    for stage, policy in stages.items():
        run_rollouts(curriculum, SCRIPTED[policy](), env_config=ENV, out_dir=tmp_path / "eval" / stage, progress=False,
                     look_on_share=float(stage.endswith("-probe")))  # fmt: skip
    for stage, key in (("sft", "loss"), ("grpo", "reward")):
        (tmp_path / stage).mkdir()
        rows = [{"step": k, key: 1.0 / k, "accuracy": 0.5, "kl": 0.0, "entropy": 0.1} | ({"val_loss": 0.4} if k == 3 else {}) for k in (1, 2, 3)]
        (tmp_path / stage / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    checkpoints = {s: tmp_path / s / "checkpoint" for s in learn.STAGES}
    summary = learn.write_summary(tmp_path, tmp_path / "heldout.jsonl", checkpoints, seconds=1.0, temperature=0.8)

    sft = {t.sample_id: t.reward for t in read_trajectories(tmp_path / "eval" / "sft")}
    grpo = {t.sample_id: t.reward for t in read_trajectories(tmp_path / "eval" / "grpo")}
    mean, low, high = mean_interval([grpo[k] - sft[k] for k in sft])
    assert summary["grpo_minus_sft"]["reward"] == {"mean": mean, "interval": [low, high], "samples": len(curriculum)}
    assert summary["grpo"]["accuracy"] == 1.0 and summary["base"]["crop_rate"] == 0.0 and summary["sft"]["crop_rate"] == 1.0
    assert summary["checks"]["grpo_accuracy>no_tool"] and not summary["checks"]["heldout_episodes>=64"]
    assert summary["grpo"]["checkpoint"] == str(checkpoints["grpo"]) and set(summary["baselines"]) == {"no-tool", "oracle"}
    for stage in learn.STAGES:
        low, high = summary[stage]["intervals"]["reward"]
        assert low <= summary[stage]["reward"] <= high
    sampled = {s: {t.sample_id: t.reward for t in read_trajectories(tmp_path / "eval" / f"{s}-sampled")} for s in learn.SAMPLED}
    mean, low, high = mean_interval([sampled["grpo"][k] - sampled["sft"][k] for k in sampled["sft"]])
    assert summary["sampled"]["grpo_minus_sft"]["reward"] == {"mean": mean, "interval": [low, high], "samples": len(curriculum)}
    assert summary["sampled"]["temperature"] == 0.8 and summary["sampled"]["grpo"]["accuracy"] == 1.0
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    table = learn.markdown_table(summary)
    assert table.count("\n| ") == 5 and "GRPO - SFT" in table and "Sampled at T = 0.8" in table
    from videoseek.envs.metrics import look_on_rate  # the look-on rate of each stage, from its greedy episodes

    for stage in learn.STAGES:
        expected = look_on_rate(read_trajectories(tmp_path / "eval" / stage))
        assert (summary[stage]["look_on"], summary[stage]["look_on_n"]) == (expected.get("look_on"), expected["look_on_n"])
    assert "Look-on rate" in table
    from videoseek.envs.metrics import reading_by_answer, shown_rate  # search and reading apart: the sweep (SFT here) is shown every flash

    by_answer = reading_by_answer(read_trajectories(tmp_path / "eval" / "sft"))
    assert summary["sft"]["clue_shown"] == {"shown": 1.0, "accuracy_shown": 1.0, "accuracy_unshown": None, "n": len(curriculum), "by_answer": by_answer}
    assert summary["grpo"]["clue_shown"]["shown"] == shown_rate(read_trajectories(tmp_path / "eval" / "grpo"))["shown"]
    worst = min(by_answer, key=lambda a: by_answer[a]["accuracy"])
    assert "Clue shown" in table and f"sft 1.000 (accuracy there 1.000, elsewhere n/a; worst answer {worst} 1.000 of {by_answer[worst]['n']} ({worst} {by_answer[worst]['n']}))" in table
    assert summary["probe"]["sft"]["look_on"] == 0.0 and summary["probe"]["grpo"]["look_on"] == 1.0
    assert summary["probe"]["grpo"]["look_on_n"] == len(curriculum) and "Look-on probe" in table

    learn.plot_curves(tmp_path / "grpo" / "metrics.jsonl", tmp_path / "sft" / "metrics.jsonl", tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    acc = {t.sample_id: t.accuracy for t in read_trajectories(tmp_path / "eval" / "grpo")}
    acc_sft = {t.sample_id: t.accuracy for t in read_trajectories(tmp_path / "eval" / "sft")}
    assert summary["checks"]["grpo_accuracy_gain_low>0"] == (mean_interval([acc[k] - acc_sft[k] for k in acc])[1] > 0)
    room = summary["grpo_minus_sft"]["accuracy_if_all_right"]
    assert room["mean"] == pytest.approx(1.0 - summary["sft"]["accuracy"]) and room["interval"][0] == mean_interval([1.0 - a for a in acc_sft.values()])[1]

    # --seeds: per-seed rows and their mean, from each seed's summary.json
    worse = json.loads(json.dumps(summary))
    worse["grpo"]["accuracy"], worse["grpo_minus_sft"]["accuracy"]["mean"], worse["checks"]["grpo_reward_gain_low>0"] = 0.25, -0.75, False
    report = learn.seeds_report({0: summary, 1: worse})
    assert report["mean"]["grpo_accuracy"] == (summary["grpo"]["accuracy"] + 0.25) / 2
    assert report["mean"]["accuracy_gain"] == (summary["grpo_minus_sft"]["accuracy"]["mean"] - 0.75) / 2
    assert "grpo_reward_gain_low>0" in report["seeds"][1]["checks_failed"] and 1 not in report["passed"]
    rows = learn.seeds_table(report).splitlines()
    assert len(rows) == 5 and rows[-1].startswith("| mean |") and "fail: " in rows[3]
    assert f"| {room['interval'][0]:+.3f} |" in rows[2]
    assert report["seeds"][0]["sampled_reward_gain"] == summary["sampled"]["grpo_minus_sft"]["reward"]
    assert rows[2].count(" | ") == rows[0].count(" | ")  # every column filled
    assert "| 0.000 / 1.000 |" in rows[2]  # the probe's look-on rates, SFT / GRPO


def test_tools_reach_every_stage_that_makes_an_env(tmp_path, monkeypatch):
    """`learn.py --tools` is passed to each `videoseek rollout` and to `run_csgrpo.py`; export-sft reads
    each trace run's tools from its run.json. The stages are recorded, not run (the first GRPO one ends it)."""
    from videoseek.training import learn

    commands: list[list[str]] = []

    class Stop(Exception):
        pass

    def record(cmd, log=None):
        commands.append(cmd)
        if any(c.endswith("run_csgrpo.py") for c in cmd):
            raise Stop

    monkeypatch.setattr(learn, "run", record)
    with pytest.raises(Stop):
        learn.learn(learn.parse_args(["--out", str(tmp_path / "run"), "--tools", "crop_video,zoom"]))
    stages = {" ".join(c[2:4]) if c[1] == "-m" else c[1].rsplit("/", 1)[-1] for c in commands}
    assert {"videoseek rollout", "videoseek export-sft", "run_csgrpo.py"} <= stages
    for cmd in commands:
        makes_env = cmd[1:4] == ["-m", "videoseek", "rollout"] or cmd[1].endswith("run_csgrpo.py")
        given = cmd[cmd.index("--tools") + 1] if "--tools" in cmd else None
        assert given == ("crop_video,zoom" if makes_env else None), cmd
    commands.clear()
    with pytest.raises(Stop):  # without --tools no stage gets one: each takes EnvConfig's default
        learn.learn(learn.parse_args(["--out", str(tmp_path / "default")]))
    assert not any("--tools" in c for c in commands)

"""`videoseek annotate-masks`: candidate Delta ranges from reasoning traces, masked episodes with
a scripted oracle that answers from pixels, resumable output."""

from __future__ import annotations

import json
import math

import pytest

from videoseek.agents.annotate_masks import annotate_samples, anchor_ranges, candidate_ranges, ref_delta_ranges
from videoseek.agents.policy import PolicyOutput
from videoseek.agents.scripted import OraclePolicy, seen_frames
from videoseek.envs.perceive import perceive
from videoseek.envs.sample import VideoSample


class AbstainingOracle(OraclePolicy):
    """The scripted oracle, but it answers "none" instead of guessing when the frames it saw do
    not show the answer — so a correct answer always means the evidence was visible."""

    name = "abstaining-oracle"

    def act(self, batch):
        outs = []
        for inp, out in zip(batch, super().act(batch)):
            if "<answer>" in out.text:
                frames, times = seen_frames(inp.messages)
                if frames is None or perceive(inp.sample, frames, times) is None:
                    out = PolicyOutput(text="<think>The frames do not show it.</think>\n<answer>none</answer>")
            outs.append(out)
        return outs


def _sample(**kw) -> VideoSample:
    base = dict(id="s", video="v.mp4", question="q", answer="x", problem_type="free_form", duration=20.0)
    return VideoSample(**{**base, **kw})


def test_candidate_ranges():
    trace = (
        "Reference frame at <time>00:00:01.0</time>: a door.\n"
        "From <time_range>00:00:01.0 - 00:00:04.5</time_range>, <delta>it closes</delta>.\n"
        "From <time_range>00:00:12.0 - 00:00:25.0</time_range>,\n<delta>Negligible change</delta>.\n"
        "Reasoning Summary: closed."
    )
    assert ref_delta_ranges(trace) == [(1.0, 4.5), (12.0, 25.0)]
    s = _sample(reference_reasoning=trace, mask_patterns=[{"time_range": (1.0, 4.5), "oracle_correct": True}])
    assert candidate_ranges(s) == [(12.0, 20.0)]  # the annotated one is skipped; clipped to the video
    # unlabelled VideoMend patterns (from `convert`) come first
    s2 = _sample(reference_reasoning=trace, metadata={"mask_candidates": [[3.0, 5.0], [5.0, 5.0]]})
    assert candidate_ranges(s2) == [(3.0, 5.0)]
    # another grounded trace: spans between consecutive cited moments
    grounded = "<obj>man</obj><box>[1,2,3,4]</box>at<t>7.5</t>s ... <obj>cup</obj><box>[1,2,3,4]</box>at<t>2</t>s"
    assert anchor_ranges(grounded) == [(2.0, 7.5)]
    assert candidate_ranges(_sample(reference_reasoning="At 00:00:03 he sits; by 00:00:09 he stands; 3 people")) == [(3.0, 9.0)]
    assert candidate_ranges(_sample(reference_reasoning="no times here")) == []
    assert len(candidate_ranges(_sample(reference_reasoning=trace), max_patterns=1)) == 1


@pytest.fixture(scope="module")
def synth_samples(tmp_path_factory) -> list[VideoSample]:
    from videoseek.envs.synth import generate_dataset

    out = tmp_path_factory.mktemp("synth-masks")
    return generate_dataset(out, n=5, seed=1, max_duration=12)


def _touches_clue(span: tuple[float, float], clues) -> bool:
    """Does the DM-GRPO mask of `span` (frames with floor(t) in [floor(s), floor(e)]) hit a clue?"""
    lo, hi = math.floor(span[0]), math.floor(span[1]) + 1
    return any(s < hi and e >= lo for s, e in clues)


def test_oracle_labels_follow_whether_the_mask_hides_the_evidence(synth_samples):
    unlabelled = [s.model_copy(update={"mask_patterns": []}) for s in synth_samples]
    done: list[VideoSample] = []
    stats = annotate_samples(unlabelled, AbstainingOracle(), on_sample=done.append)
    assert stats.failed_patterns == 0 and stats.samples == 5 and len(done) == 5
    assert stats.patterns == sum(len(candidate_ranges(s)) for s in unlabelled) >= 10
    labels = [(p.time_range, p.oracle_correct, s.clue_intervals) for s in done for p in s.mask_patterns]
    assert any(ok for _, ok, _ in labels) and not all(ok for _, ok, _ in labels)
    for span, ok, clues in labels:
        assert ok == (not _touches_clue(span, clues)), (span, clues)
    # where synth's own generator labelled the same range, the oracle agrees with it
    for original, annotated in zip(synth_samples, sorted(done, key=lambda s: s.id)):
        truth = {p.time_range: p.oracle_correct for p in original.mask_patterns}
        found = {p.time_range: p.oracle_correct for p in annotated.mask_patterns}
        shared = truth.keys() & found.keys()
        assert shared  # the "Negligible change" Delta is cited in whole seconds
        assert all(truth[k] == found[k] for k in shared)


def test_a_broken_video_fails_its_patterns_not_the_run(synth_samples, tmp_path):
    broken = synth_samples[0].model_copy(update={"id": "broken", "video": str(tmp_path / "gone.mp4"), "mask_patterns": []})
    good = synth_samples[1].model_copy(update={"mask_patterns": []})
    done: list[VideoSample] = []
    stats = annotate_samples([broken, good], AbstainingOracle(), on_sample=done.append)
    assert stats.failed_patterns == len(candidate_ranges(broken)) > 0
    assert "video file not found" in next(iter(stats.failures))
    assert {s.id: len(s.mask_patterns) for s in done} == {"broken": 0, good.id: len(candidate_ranges(good))}


def test_cli_resumes_and_records_masked_episodes(synth_samples, tmp_path, capsys):
    from videoseek.cli import main
    from videoseek.envs.sample import write_jsonl

    data = write_jsonl([s.model_copy(update={"mask_patterns": []}) for s in synth_samples[:3]], tmp_path / "in.jsonl")
    out, runs = tmp_path / "annotated.jsonl", tmp_path / "run"
    args = ["annotate-masks", str(data), "--out", str(out), "--policy", "oracle", "--trajectories", str(runs)]
    assert main(args + ["--limit", "1"]) == 0
    assert len(out.read_text().splitlines()) == 1
    assert main(args) == 2 and "pass --resume" in capsys.readouterr().err
    with out.open("a") as fh:
        fh.write('{"id": "torn')  # an interrupted write
    assert main(args + ["--resume"]) == 0
    assert "(1 already done)" in capsys.readouterr().out
    rows = VideoSample.from_jsonl(out)
    assert sorted(r.id for r in rows) == sorted(s.id for s in synth_samples[:3])
    assert all(r.mask_patterns for r in rows)
    trajs = [json.loads(x) for x in (runs / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == sum(len(r.mask_patterns) for r in rows)
    assert all(t["group"]["perturbation"]["kind"] == "mask" for t in trajs)
    masked = [f["masked"] for t in trajs for turn in t["turns"] for f in turn["observation"]["frames"]]
    assert any(masked) and not all(masked)


def test_docstring_examples():
    import doctest

    import videoseek.agents.annotate_masks as module

    result = doctest.testmod(module)
    assert result.attempted >= 2 and result.failed == 0


def test_cli_with_a_model_policy(synth_samples, tmp_path, capsys):
    """`--policy hf:PATH`: the tiny offline Qwen2.5-VL runs the masked episodes through transformers."""
    pytest.importorskip("transformers")
    import torch

    from videoseek.agents.tiny_model import build_tiny_model
    from videoseek.cli import main
    from videoseek.envs.sample import write_jsonl

    model = build_tiny_model(tmp_path / "tiny", seed=0)
    data = write_jsonl([synth_samples[0].model_copy(update={"mask_patterns": []})], tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads on a shared 2-core machine spin-wait on each other
    try:
        rc = main(["annotate-masks", str(data), "--out", str(out), "--policy", f"hf:{model}", "--max-patterns", "1",
                   "--max-turns", "2", "--max-new-tokens", "8", "--max-pixels", str(56 * 56), "--trajectories", str(tmp_path / "run")])  # fmt: skip
    finally:
        torch.set_num_threads(previous)
    assert rc == 0, capsys.readouterr().err
    (row,) = VideoSample.from_jsonl(out)
    (expected,) = candidate_ranges(synth_samples[0].model_copy(update={"mask_patterns": []}), max_patterns=1)
    assert [p.time_range for p in row.mask_patterns] == [expected]
    (traj,) = [json.loads(x) for x in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert traj["group"]["perturbation"]["time_range"] == list(expected)
    assert traj["turns"] and all(0 < t["tokens"]["completion"] <= 8 and t["tokens"]["prompt"] > 0 for t in traj["turns"])


def test_a_policy_crash_on_one_sample_fails_only_its_patterns(synth_samples):
    class FragileOracle(AbstainingOracle):
        """Raises whenever the batch holds the sample it cannot handle."""

        def act(self, batch):
            if any(inp.sample.id == "fragile" for inp in batch):
                raise RuntimeError("cannot render this sample")
            return super().act(batch)

    fragile = synth_samples[2].model_copy(update={"id": "fragile", "mask_patterns": []})
    good = synth_samples[3].model_copy(update={"mask_patterns": []})
    done: dict[str, VideoSample] = {}
    stats = annotate_samples([fragile, good], FragileOracle(), on_sample=lambda s: done.setdefault(s.id, s))
    assert stats.failed_patterns == len(candidate_ranges(fragile))
    assert stats.failures == {"policy: RuntimeError: cannot render this sample": len(candidate_ranges(fragile))}
    assert done["fragile"].mask_patterns == [] and len(done[good.id].mask_patterns) == len(candidate_ranges(good))

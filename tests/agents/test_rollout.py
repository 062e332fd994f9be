from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from videoseek.agents.evaluate import summarize
from videoseek.agents.policy import PolicyOutput
from videoseek.agents.policy import load_policy
from videoseek.agents.rollout import run_rollouts
from videoseek.envs.trajectory import read_trajectories
from videoseek.agents.scripted import OraclePolicy
from videoseek.envs.env import EnvConfig
from videoseek.envs.sample import VideoSample
from videoseek.envs.synth import generate_dataset


@pytest.fixture(scope="module")
def synth_samples(tmp_path_factory) -> list[VideoSample]:
    return generate_dataset(tmp_path_factory.mktemp("synth"), n=5, seed=1)


def test_oracle_sees_and_answers_no_tool_mostly_cannot(synth_samples):
    oracle = run_rollouts(synth_samples, load_policy("oracle"), progress=False)
    blind = run_rollouts(synth_samples, load_policy("no-tool"), progress=False)
    acc = lambda ts: np.mean([t.accuracy for t in ts])  # noqa: E731
    assert acc(oracle) >= 0.8
    assert acc(blind) < acc(oracle)
    assert all(t.metrics["coverage"] == pytest.approx(1.0) for t in oracle)
    assert all(t.metrics["calls"] == 0 for t in blind)


def test_trajectory_files_reference_real_frames(synth_samples, tmp_path):
    run_rollouts(synth_samples[:2], load_policy("oracle"), out_dir=tmp_path, progress=False)
    lines = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        row = json.loads(line)
        assert row["schema_version"] == 2 and "base64" not in line
        refs = row["initial"]["frames"] + [f for t in row["turns"] for f in t["observation"]["frames"]]
        assert len(refs) >= 8 + 1
        for ref in refs:
            img = Image.open(tmp_path / ref["path"])
            assert img.format == "JPEG"
    trajs = read_trajectories(tmp_path)
    crop_turn = trajs[0].turns[0]
    assert crop_turn.call is not None
    assert all(crop_turn.call.start - 1e-6 <= f.t <= crop_turn.call.end + 0.1 for f in crop_turn.observation.frames)


class CountingPolicy(OraclePolicy):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def act(self, batch):
        self.calls += len(batch)
        return super().act(batch)


def test_rerun_skips_finished_episodes_and_recovers_a_truncated_file(synth_samples, tmp_path):
    first = CountingPolicy()
    run_rollouts(synth_samples[:3], first, group_size=2, out_dir=tmp_path, progress=False)
    assert first.calls > 0
    again = CountingPolicy()
    run_rollouts(synth_samples[:3], again, group_size=2, out_dir=tmp_path, progress=False)
    assert again.calls == 0
    path = tmp_path / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])  # a run killed mid-write
    third = CountingPolicy()
    run_rollouts(synth_samples[:3], third, group_size=2, out_dir=tmp_path, progress=False)
    assert third.calls > 0  # the broken sample's group is redone
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(rows) == 6 and len({r["episode_id"] for r in rows}) == 6


class Flaky:
    """Crashes on one sample's episodes; the others must finish."""

    name = "flaky"

    def __init__(self, bad_id):
        self.bad_id = bad_id
        self.inner = OraclePolicy()

    def act(self, batch):
        if any(inp.sample.id == self.bad_id for inp in batch):
            raise RuntimeError("boom")
        return self.inner.act(batch)


def test_a_crash_in_one_episode_is_recorded_and_the_run_goes_on(synth_samples, tmp_path):
    missing = synth_samples[1].model_copy(update={"id": "missing-video", "video": str(tmp_path / "gone.mp4")})
    samples = [synth_samples[0], missing, synth_samples[2]]
    trajs = run_rollouts(samples, Flaky(synth_samples[2].id), out_dir=tmp_path, progress=False)
    by_id = {t.sample_id: t for t in trajs}
    assert by_id[synth_samples[0].id].failure is None and by_id[synth_samples[0].id].terminated
    assert "reset" in by_id["missing-video"].failure and "gone.mp4" in by_id["missing-video"].failure
    assert "boom" in by_id[synth_samples[2].id].failure
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 3


def test_summary_metrics(synth_samples):
    trajs = run_rollouts(synth_samples, load_policy("uniform"), progress=False)
    m = summarize(trajs)
    assert m["episodes"] == 5 and m["failures"] == 0
    assert m["calls"] == pytest.approx(4.0)
    assert set(m["by_task_kind"]) == {s.metadata["task_kind"] for s in synth_samples}
    assert 0 <= m["accuracy"] <= 1 and m["invalid_call_rate"] == 0


def test_policy_output_count_mismatch_is_contained(synth_samples):
    class Broken:
        name = "broken"

        def act(self, batch):
            return [PolicyOutput("<answer>A</answer>")] * (len(batch) + 1)

    trajs = run_rollouts(synth_samples[:2], Broken(), progress=False)
    assert all(t.failure and "outputs" in t.failure for t in trajs)


def test_finished_groups_release_their_frames_during_the_run(index_sample):
    """A long run holds only live episodes: once a group is written, no frame array of it stays
    alive but those the bounded frame cache keeps for the next episodes of the video."""
    import gc
    import weakref

    from videoseek.envs.video import FRAME_CACHE

    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.scripted import UniformPolicy
    from videoseek.envs.env import EnvConfig

    seen: dict[str, list] = {}

    class Watching(UniformPolicy):
        def turn(self, inp):
            seen.setdefault(inp.episode_id, []).extend(weakref.ref(m.frames) for m in inp.messages if m.frames is not None)
            return super().turn(inp)

    finished: list[str] = []
    alive_after: list[int] = []

    def on_episode(traj):
        gc.collect()
        alive_after.append(sum(1 for e in finished for ref in seen[e] if ref() is not None and not FRAME_CACHE.holds(ref())))
        finished.append(traj.episode_id)

    samples = [index_sample.model_copy(update={"id": f"q{k}"}) for k in range(4)]
    config = EnvConfig(initial_frames=4, frames_per_call=4, max_total_frames=24, max_pixels=64 * 64)
    run_rollouts(samples, Watching(windows=2), group_size=1, env_config=config, batch_episodes=1, progress=False, on_episode=on_episode)
    assert len(finished) == 4 and all(seen[e] for e in finished)
    assert alive_after == [0, 0, 0, 0]


def test_streaming_run_plans_lazily_and_keeps_nothing(synth_samples, tmp_path):
    """keep=False: the same episodes reach on_episode and the file, none is returned, and a sample's
    episodes are planned only when the batch has room (at most a batch and a group ahead)."""
    from videoseek.agents.rollout import drive_episodes, plan_episodes

    config = EnvConfig(initial_frames=2, frames_per_call=2, max_total_frames=8, max_pixels=64 * 64)
    kept = run_rollouts(synth_samples, OraclePolicy(), group_size=2, env_config=config, progress=False)
    streamed: list = []
    returned = run_rollouts(synth_samples, OraclePolicy(), group_size=2, env_config=config, out_dir=tmp_path,
                            progress=False, on_episode=streamed.append, keep=False)  # fmt: skip
    assert returned == []
    assert [(t.episode_id, t.reward) for t in streamed] == [(t.episode_id, t.reward) for t in kept]
    assert sorted(t.episode_id for t in read_trajectories(tmp_path)) == sorted(t.episode_id for t in kept)

    drawn, drawn_at_first_end = [0], []

    def planned():
        for ep in plan_episodes(synth_samples, 2, (), 0):
            drawn[0] += 1
            yield ep

    drive_episodes(planned(), OraclePolicy(), config, batch_episodes=3, on_done=lambda ep: drawn_at_first_end.append(drawn[0]))
    assert drawn_at_first_end[0] == 3 and drawn[0] == 2 * len(synth_samples)

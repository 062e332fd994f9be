"""Trajectory files survive kills and odd text (issue 13, hardening items 3 and 8).

- A run that starts rewrites `trajectories.jsonl` (dropping a line cut by an earlier kill); a kill
  during that rewrite must lose no line and duplicate none.
- Model text with lone surrogates must not abort `run_rollouts`; text with U+2028 or U+0085
  must not split a line (and so drop the episode) when the file is read back.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections import Counter
from pathlib import Path

from videoseek.agents.policy import PolicyOutput
from videoseek.agents.rollout import run_rollouts
from videoseek.envs.trajectory import TrajectoryWriter, read_trajectories
from videoseek.agents.scripted import OraclePolicy
from videoseek.envs.trajectory import Trajectory

LINES = 2000


def _trajectory(k: int, assistant: str = "<think>look</think><answer>B</answer>") -> Trajectory:
    return Trajectory.model_validate({
        "episode_id": f"s{k:05d}/g0", "sample_id": f"s{k:05d}", "group": {"id": f"s{k:05d}"}, "question": "Which colour? " * 10,
        "answer": "B", "problem_type": "multiple_choice", "duration": 20.0, "video": "v.mp4", "initial": {"text": "frames " * 10},
        "turns": [{"index": 0, "assistant": assistant, "action": {"type": "answer", "text": "B"},
                   "observation": {"text": "Answer received."}, "evidence": {"coverage": 0.0}}],
    })  # fmt: skip


def _episode_ids(path: Path) -> Counter:
    """Episode ids of the readable lines (split on b"\\n" only, as the writer does)."""
    ids: Counter = Counter()
    for line in path.read_bytes().split(b"\n"):
        try:
            ids[json.loads(line)["episode_id"]] += 1
        except (ValueError, KeyError, TypeError):
            continue
    return ids


def _reopen(run_dir: str) -> None:
    """What every (resumed) run does first: list the finished episodes, rewriting the file."""
    TrajectoryWriter(run_dir).finished_episodes()


def _state(run_dir: Path, path: Path) -> tuple:
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns), set(os.listdir(run_dir))


def _touched(before: tuple, run_dir: Path, path: Path) -> bool:
    """Has the writer started writing: the file changed, or a new file appeared in the folder?"""
    now = _state(run_dir, path)
    return now[0] != before[0] or bool(now[1] - before[1])


def test_a_kill_during_the_rewrite_at_start_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    lines = [_trajectory(k).model_dump_json() for k in range(LINES)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    expected = Counter(json.loads(line)["episode_id"] for line in lines)
    cut = lines[0][:300]  # a line cut by a killed run: every start has to rewrite the file
    ctx = multiprocessing.get_context("fork")  # the child starts at once, already importing nothing
    # Kills at fixed delays after the start (mostly while the file is still being read), then
    # right when the child first touches the folder or the file, and at delays after that.
    plan = [("start", d) for d in (0.0, 0.002, 0.01)] + [("change", d) for d in (0.0, 0.0, 0.0002, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.03, 0.06)]
    in_window = 0  # kills that left a half-written new file behind: the window was hit
    for when, delay in plan:
        if path.read_bytes().endswith(b"\n"):
            with path.open("a", encoding="utf-8") as fh:
                fh.write(cut)
        before = _state(tmp_path, path)
        child = ctx.Process(target=_reopen, args=(str(tmp_path),))
        child.start()
        if when == "change":
            deadline = time.monotonic() + 20
            while child.is_alive() and not _touched(before, tmp_path, path) and time.monotonic() < deadline:
                pass
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert _episode_ids(path) == expected, f"kill at {when}+{delay * 1e3:.1f} ms lost or duplicated lines"
        in_window += any(name.endswith(".tmp") for name in os.listdir(tmp_path))
    # A start that is not killed removes the cut line and the temporary files of the killed ones.
    _reopen(str(tmp_path))
    assert _episode_ids(path) == expected and path.read_bytes().endswith(b"}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trajectories.jsonl"]
    assert in_window >= 1


def test_a_start_that_changes_nothing_writes_nothing(tmp_path):
    writer = TrajectoryWriter(tmp_path)
    for k in range(3):
        writer.write(_trajectory(k))
    before = writer.path.stat()
    assert TrajectoryWriter(tmp_path).finished_episodes() == {"s00000/g0", "s00001/g0", "s00002/g0"}
    TrajectoryWriter(tmp_path).drop(set())
    after = writer.path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_line_cut_inside_a_multibyte_character_is_dropped_not_fatal(tmp_path):
    writer = TrajectoryWriter(tmp_path)
    writer.write(_trajectory(0))
    cut = _trajectory(1, "<think>红色</think><answer>B</answer>").model_dump_json().encode()
    with writer.path.open("ab") as fh:
        fh.write(cut[: cut.index("红".encode()) + 1])  # a kill between the bytes of one character
    assert TrajectoryWriter(tmp_path).finished_episodes() == {"s00000/g0"}
    assert [t.episode_id for t in read_trajectories(tmp_path)] == ["s00000/g0"]


def test_line_separators_in_model_text_do_not_split_a_trajectory(tmp_path):
    writer = TrajectoryWriter(tmp_path)
    writer.write(_trajectory(0, "<think>a\u2028b\u2029c\x85d\x1ce\x0bf</think><answer>B</answer>"))
    writer.write(_trajectory(1))
    assert TrajectoryWriter(tmp_path).finished_episodes() == {"s00000/g0", "s00001/g0"}
    back = read_trajectories(tmp_path)
    assert [t.episode_id for t in back] == ["s00000/g0", "s00001/g0"]
    assert back[0].turns[0].assistant == "<think>a\u2028b\u2029c\x85d\x1ce\x0bf</think><answer>B</answer>"


def test_an_unserialisable_value_does_not_stop_the_writer(tmp_path):
    traj = _trajectory(0)
    traj.metrics["odd"] = {1, 2}  # not JSON: pydantic cannot dump it
    traj.turns[0].think = "x\ud800"  # slipped past every sanitiser
    writer = TrajectoryWriter(tmp_path)
    writer.write(traj)
    writer.write(_trajectory(1))
    back = read_trajectories(tmp_path)
    assert [t.episode_id for t in back] == ["s00000/g0", "s00001/g0"]
    assert back[0].metrics["sanitized_on_write"] is True and back[0].turns[0].think == "x\ufffd"


class SurrogatePolicy(OraclePolicy):
    """The oracle, whose decoded text carries a lone surrogate (a broken byte-level decode)."""

    name = "surrogate"

    def act(self, batch):
        return [PolicyOutput(text="<think>look \ud83d closer</think>" + out.text) for out in super().act(batch)]


def test_run_rollouts_survives_a_lone_surrogate_and_records_it(index_sample, tmp_path):
    trajs = run_rollouts([index_sample], SurrogatePolicy(), group_size=2, out_dir=tmp_path, progress=False)
    assert len(trajs) == 2 and all(t.failure is None and t.terminated for t in trajs)
    back = read_trajectories(tmp_path)
    assert sorted(t.episode_id for t in back) == sorted(t.episode_id for t in trajs)
    for t in back:
        assert t.metrics["sanitized"] == len(t.turns) >= 2  # one lone surrogate in every turn
        assert all("\ufffd" in turn.assistant and any("U+FFFD" in r for r in turn.repairs) for turn in t.turns)
        assert t.metrics["calls"] >= 1 and t.prediction  # the oracle's crop and answer still parse
    again = SurrogatePolicy()
    assert run_rollouts([index_sample], again, group_size=2, out_dir=tmp_path, progress=False) == []  # resumed: nothing to redo


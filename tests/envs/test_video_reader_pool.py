"""Issue 13 hardening of the reader pool: threads opening one file at once share one decoder, and
threads missing the same frames at once decode them once. Real videos, real decoders."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from videos import read_index, write_index_video

from videoseek.envs import video as video_mod
from videoseek.envs.env import VideoSeekEnv
from videoseek.envs.sample import VideoSample
from videoseek.envs.video import FrameCache, VideoReader, open_video


def _together(n: int, work) -> list:
    """Run `work(i)` in `n` threads released at the same moment; results in thread order."""
    barrier = threading.Barrier(n)
    out: list = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = work(i)
        except BaseException as exc:  # reported below, with the thread's own traceback lost
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


@pytest.mark.parametrize("backend", [b for b in video_mod.BACKENDS if video_mod.backend_missing(b) is None])
def test_threads_opening_one_file_at_once_share_one_reader(tmp_path, backend):
    path = write_index_video(tmp_path / "shared.mp4", num_frames=60, fps=10)  # not in the pool yet
    opens = video_mod.STATS["opens"]
    readers = _together(16, lambda i: open_video(path, backend))
    assert len({id(r) for r in readers}) == 1  # before: each racing thread opened its own decoder
    assert video_mod.STATS["opens"] - opens == 1
    # and the shared reader still gives every thread its own right frames
    plans = [np.random.default_rng(i).integers(0, 60, size=12) for i in range(16)]
    frames = _together(16, lambda i: readers[0].frames_by_index(plans[i], max_pixels=96 * 48)[0])
    assert all([read_index(f) for f in frames[i]] == list(plans[i]) for i in range(16))


def test_envs_started_in_threads_hold_one_decoder(tmp_path):
    path = write_index_video(tmp_path / "episodes.mp4", num_frames=80, fps=10)
    sample = VideoSample(id="s", video=str(path), question="q", answer="3", problem_type="numerical", clue_intervals=[(2.0, 3.0)])
    opens = video_mod.STATS["opens"]
    envs = _together(12, lambda i: VideoSeekEnv(sample))
    assert len({id(e.video) for e in envs}) == 1 and video_mod.STATS["opens"] - opens == 1
    obs = _together(12, lambda i: envs[i].reset(seed=i)[0])
    expected = [int((k + 0.5) * 8.0 / 8 * 10) for k in range(8)]
    assert all([read_index(f) for f in o["frames"]] == expected for o in obs)


def test_threads_missing_the_same_frames_decode_them_once(index_video):
    reader = VideoReader(index_video, cache=FrameCache())  # a private cache: nothing decoded yet
    decoded = video_mod.STATS["decoded_frames"]
    wanted = list(range(40, 60))
    frames = _together(8, lambda i: reader.frames_by_index(wanted)[0])
    # Every thread missed all 20 at once; before, each one then decoded them again in turn.
    assert video_mod.STATS["decoded_frames"] - decoded == len(wanted)
    assert all([read_index(f) for f in fs] == wanted for fs in frames)

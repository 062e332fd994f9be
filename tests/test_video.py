from __future__ import annotations

import threading

import numpy as np
import pytest
from videos import read_index

from videoseek.envs.sample import DataError
from videoseek.envs.video import FrameCache, VideoReader, fit_pixels, probe_video


@pytest.mark.parametrize("backend", ["decord", "pyav"])
def test_frames_match_their_timestamps(index_video, backend):
    reader = VideoReader(index_video, backend=backend, cache=FrameCache())
    assert reader.num_frames == 200
    assert reader.fps == pytest.approx(10)
    assert reader.duration == pytest.approx(20.0)
    times = [0.0, 0.04, 0.1, 3.33, 12.05, 19.95, 25.0]
    frames, ts = reader.frames_at(times)
    assert frames.shape == (7, 96, 192, 3) and frames.dtype == np.uint8
    got = [read_index(f) for f in frames]
    # The frame shown at time t is floor(t * fps); timestamps are that frame's own time.
    assert got == [0, 0, 1, 33, 120, 199, 199]
    np.testing.assert_allclose(ts, np.array(got) / 10, atol=1e-4)


def test_backends_agree(index_video):
    a = VideoReader(index_video, backend="decord", cache=FrameCache())
    b = VideoReader(index_video, backend="pyav", cache=FrameCache())
    idx = [5, 77, 150, 3]
    fa, ta = a.frames_by_index(idx)
    fb, tb = b.frames_by_index(idx)
    np.testing.assert_allclose(ta, tb, atol=1e-4)
    assert [read_index(f) for f in fa] == [read_index(f) for f in fb] == idx


def test_pixel_budget_keeps_aspect_and_index(index_video):
    reader = VideoReader(index_video, cache=FrameCache())
    frames, _ = reader.frames_by_index([42, 43], max_pixels=96 * 48)
    assert frames.shape[1:3] == (48, 96)
    assert [read_index(f) for f in frames] == [42, 43]
    assert fit_pixels(1920, 1080, 224 * 224)[0] / fit_pixels(1920, 1080, 224 * 224)[1] == pytest.approx(16 / 9, rel=0.02)


def test_overlay_changes_only_the_corner(index_video):
    reader = VideoReader(index_video, cache=FrameCache())
    plain, _ = reader.frames_by_index([123])
    over, _ = reader.frames_by_index([123], overlay=True)
    assert read_index(over[0]) == 123
    diff = np.argwhere((plain[0] != over[0]).any(-1))
    assert len(diff) > 0 and diff[:, 0].max() < 20 and diff[:, 1].max() < 70


def test_cache_is_bounded_shared_and_exact(index_video):
    frame_bytes = 96 * 192 * 3
    cache = FrameCache(max_bytes=10 * frame_bytes)
    r1 = VideoReader(index_video, cache=cache)
    r2 = VideoReader(index_video, cache=cache)
    cold, _ = r1.frames_by_index(range(8))
    assert cache.misses == 8 and len(cache) == 8
    warm, _ = r2.frames_by_index(range(8))  # a second reader of the same file hits
    assert cache.hits == 8
    np.testing.assert_array_equal(cold, warm)
    r1.frames_by_index(range(50, 80))
    assert cache.nbytes <= cache.max_bytes and len(cache) == 10
    # Returned frames are copies: changing them never changes the cache.
    warm[:] = 7
    again, _ = r1.frames_by_index([79])
    assert read_index(again[0]) == 79


def test_cache_under_threads_gives_the_same_frames(index_video):
    cache = FrameCache(max_bytes=40 * 96 * 192 * 3)
    reader = VideoReader(index_video, cache=cache)
    rng = np.random.default_rng(0)
    plans = [rng.integers(0, 200, size=20) for _ in range(8)]
    errors: list[str] = []

    def work(plan):
        frames, ts = reader.frames_by_index(plan)
        got = [read_index(f) for f in frames]
        if got != list(plan):
            errors.append(f"{got} != {list(plan)}")

    threads = [threading.Thread(target=work, args=(p,)) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.nbytes <= cache.max_bytes


def test_bad_videos_give_one_line_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        probe_video(tmp_path / "missing.mp4")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty"):
        probe_video(empty)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00garbage" * 500)
    for backend in ("decord", "pyav"):
        with pytest.raises(DataError) as err:
            VideoReader(junk, backend=backend)
        assert str(junk) in str(err.value) and "\n" not in str(err.value)

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from videos import has_bframes, read_index

from videoseek.envs.sample import DataError
from videoseek.envs.video import BACKENDS, FrameCache, VideoReader, backend_missing, fit_pixels, overlay_timestamp, probe_video


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


def test_one_time_label_for_the_overlay_and_the_render(index_video, index_sample):
    """`overlay_timestamp` draws both labels: HH:MM:SS in the model's frames (`timestamp_overlay`),
    seconds as the env's text writes them in the "rgb_array" render; the frame is never changed."""
    from videoseek.envs import VideoSeekEnv
    from videoseek.envs.tools import format_times

    reader = VideoReader(index_video, cache=FrameCache())
    (plain,), (t,) = reader.frames_by_index([123])
    (over,), _ = reader.frames_by_index([123], overlay=True)
    np.testing.assert_array_equal(overlay_timestamp(plain, t), over)  # the cached overlay is this function's
    seconds = overlay_timestamp(plain, t, clock=False)
    assert not np.array_equal(seconds[:14, :60], over[:14, :60]) and np.array_equal(seconds[20:], plain[20:])
    assert not plain.flags.writeable  # the shared frame is read, never drawn on
    env = VideoSeekEnv(index_sample, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    w = obs["frames"].shape[2]
    np.testing.assert_array_equal(env.render()[:, :w], overlay_timestamp(obs["frames"][0], obs["timestamps"][0], clock=False))
    assert format_times([12.3, 12.345, 12, 1.0334]) == "12.3s, 12.35s, 12.0s, 1.03s"


def test_cache_is_bounded_shared_and_exact(index_video):
    frame_bytes = 96 * 192 * 3
    cache = FrameCache(max_bytes=20 * frame_bytes)
    r1 = VideoReader(index_video, cache=cache)
    r2 = VideoReader(index_video, cache=cache)
    cold, _ = r1.frames_by_index(range(8))
    assert cache.misses == 8 and len(cache) == 9  # 8 frames and their batch (views of one array)
    warm, _ = r2.frames_by_index(range(8))  # a second reader of the same file hits
    assert cache.hits == 8
    assert warm is cold  # shared, not copied
    part, _ = r2.frames_by_index([3, 5])  # other batches reuse the cached frames
    assert cache.hits == 10 and [read_index(f) for f in part] == [3, 5]
    r1.frames_by_index(range(50, 80))
    assert cache.nbytes <= cache.max_bytes
    # Returned frames are read-only: no caller can change what another one sees.
    with pytest.raises(ValueError, match="read-only"):
        warm[:] = 7
    mine = warm.copy()
    mine[:] = 7
    again, _ = r1.frames_by_index([79])
    assert read_index(again[0]) == 79 and read_index(r2.frames_by_index(range(8))[0][0]) == 0


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
    for backend in [b for b in BACKENDS if backend_missing(b) is None]:
        with pytest.raises(DataError) as err:
            VideoReader(junk, backend=backend)
        assert str(junk) in str(err.value) and "\n" not in str(err.value)


# ---- all three backends on real H.264 with B-frames ---------------------------------------------
def _reader_or_skip(path, backend):
    missing = backend_missing(backend)
    if missing is not None:
        if backend == "torchcodec" and os.environ.get("VIDEOSEEK_REQUIRE_TORCHCODEC"):
            pytest.fail(missing)  # CI installs FFmpeg's libraries (make ffmpeg): a skip would hide a break
        pytest.skip(missing)
    return VideoReader(path, backend=backend, cache=FrameCache())


def test_bframe_video_has_bframes(bframe_video):
    assert has_bframes(bframe_video)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("video", ["index_video", "bframe_video"])
def test_every_backend_is_frame_exact(request, video, backend):
    """Each requested time gives the frame shown then, labelled with its own time, on a video
    without B-frames and one with them, at native size and decoded straight to a smaller size."""
    reader = _reader_or_skip(request.getfixturevalue(video), backend)
    assert reader.num_frames == 200 and reader.fps == pytest.approx(10)
    times = [0.0, 0.04, 0.1, 2.45, 2.5, 3.33, 12.05, 19.95, 25.0, 7.0]  # out of order, GOP edges, past the end
    expected = [0, 0, 1, 24, 25, 33, 120, 199, 199, 70]
    frames, ts = reader.frames_at(times)
    assert frames.shape == (10, 96, 192, 3) and [read_index(f) for f in frames] == expected
    np.testing.assert_allclose(ts, np.array(expected) / 10, atol=1e-4)
    small, _ = reader.frames_at(times, max_pixels=96 * 48)
    assert small.shape == (10, 48, 96, 3) and [read_index(f) for f in small] == expected
    window = list(range(101, 109))  # a crop window, B-frames inside one GOP
    assert [read_index(f) for f in reader.frames_by_index(window, max_pixels=96 * 48)[0]] == window


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_agree_on_timestamps(bframe_video, backend):
    reference = VideoReader(bframe_video, backend="pyav", cache=FrameCache())
    reader = _reader_or_skip(bframe_video, backend)
    np.testing.assert_allclose(reader.frame_times, reference.frame_times, atol=1e-4)
    assert reader.duration == pytest.approx(reference.duration, abs=1e-3)

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the same examples every time (a property failure there must be reproducible).
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

sys.path.insert(0, str(Path(__file__).parent))

from conftest_model import family_model_dir, single_thread_torch, tiny_model_dir, tiny_qwen3_model_dir  # noqa: E402,F401
from videos import write_index_video  # noqa: E402

from videoseek.envs.sample import VideoSample  # noqa: E402


@pytest.fixture(scope="session")
def index_video(tmp_path_factory) -> Path:
    """20 s at 10 fps, 192x96, frame i encodes i in its pixels."""
    return write_index_video(tmp_path_factory.mktemp("videos") / "index.mp4", num_frames=200, fps=10)


@pytest.fixture(scope="session")
def bframe_video(tmp_path_factory) -> Path:
    """The index video encoded with B-frames (x264 medium, 3 B-frames, keyframes 25 frames apart)."""
    return write_index_video(tmp_path_factory.mktemp("videos") / "index_bframes.mp4", num_frames=200, fps=10, gop=25, bframes=3)


@pytest.fixture
def index_sample(index_video) -> VideoSample:
    return VideoSample(
        id="idx-1",
        video=str(index_video),
        question="Which colour flashes?",
        options=["A. red", "B. green", "C. blue", "D. yellow"],
        answer="B",
        clue_intervals=[(12.0, 13.5)],
        reference_reasoning="<think>Ref: at 00:00:01 nothing. Delta: at 00:00:12 green.</think>",
        mask_patterns=[{"time_range": (3.0, 4.0), "oracle_correct": True}, {"time_range": (12.0, 13.5), "oracle_correct": False}],
        metadata={"task_kind": "test"},
    )


@pytest.fixture
def page(browser):
    """A fresh Chromium page (the module's `browser` fixture); any uncaught page error fails the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(10_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert errors == [], errors

"""Session fixture `tiny_model_dir`: the tiny offline Qwen2.5-VL, built once per test session.

Import it from tests/conftest.py (which puts this folder on sys.path):
`from conftest_model import single_thread_torch, tiny_model_dir  # noqa: E402,F401`.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen2.5-VL checkpoint directory (seed 0), built offline in a few seconds."""
    from videoseek.agents.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "qwen2_5_vl", seed=0)


@pytest.fixture(scope="module")
def single_thread_torch():
    """Run torch on one thread for a module: on a shared 2-core machine two threads spin-wait on
    each other and small matmuls get ~20x slower. The previous setting is restored afterwards."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)

"""Session fixtures for the tiny offline models, each built once per test session:

- `tiny_model_dir`: the tiny Qwen2.5-VL (the default family).
- `tiny_qwen3_model_dir`: the tiny Qwen3-VL.
- `family_model_dir`: `(family_name, path)`, parametrized over `agents.families.FAMILIES`
  (ids are the names), so a test that uses it runs once per family.

Import them from tests/conftest.py (which puts this folder on sys.path):
`from conftest_model import family_model_dir, single_thread_torch, tiny_model_dir, tiny_qwen3_model_dir  # noqa: E402,F401`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from videoseek.agents.families import FAMILIES, QWEN2_5_VL, QWEN3_VL


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen2.5-VL checkpoint directory (seed 0), built offline in a few seconds."""
    from videoseek.agents.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "qwen2_5_vl", seed=0)


@pytest.fixture(scope="session")
def tiny_qwen3_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen3-VL checkpoint directory (seed 0), built offline in a few seconds."""
    from videoseek.agents.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "qwen3_vl", seed=0, family=QWEN3_VL.name)


@pytest.fixture(scope="session", params=list(FAMILIES), ids=list(FAMILIES))
def family_model_dir(request) -> tuple[str, Path]:
    """(family name, tiny checkpoint directory) for each family in `FAMILIES`; reuses the fixtures above."""
    fixture = {QWEN2_5_VL.name: "tiny_model_dir", QWEN3_VL.name: "tiny_qwen3_model_dir"}.get(request.param)
    if fixture is not None:
        return request.param, request.getfixturevalue(fixture)
    from videoseek.agents.tiny_model import build_tiny_model

    folder = request.getfixturevalue("tmp_path_factory").mktemp("tiny-model") / request.param.replace(".", "_")
    return request.param, build_tiny_model(folder, seed=0, family=request.param)


@pytest.fixture(scope="module")
def single_thread_torch():
    """Run torch on one thread for a module: on a shared 2-core machine two threads spin-wait on
    each other and small matmuls get ~20x slower. The previous setting is restored afterwards."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)

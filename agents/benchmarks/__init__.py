"""Official metrics of public video benchmarks, computed from a run's trajectories.

One module per benchmark (`vstar.py`, `charades_sta.py`, ...), each reproducing that benchmark's
own evaluation script (same answer extraction, IoU, averaging and category breakdowns; each
metric's docstring cites the script). `videoseek eval RUN --benchmark NAME` looks the name up in
`BENCHMARK_METRICS`, imports the module only then, prints its table and writes RUN/metrics.json.

Contract of a module:

    def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict
        # the official numbers (overall and per category), plain JSON-able values
    def format_table(metrics: dict) -> str
        # the table as the benchmark's paper reports it (markdown)
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The same names and module names as the converters (`videoseek convert --from NAME`).
from videoseek.envs.benchmarks import BENCHMARK_CONVERTERS as BENCHMARK_METRICS


def metrics_module(name: str) -> ModuleType:
    """The metrics module of benchmark `name` (ValueError listing the names if unknown)."""
    if name not in BENCHMARK_METRICS:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARK_METRICS)}")
    return importlib.import_module(f"{__name__}.{BENCHMARK_METRICS[name]}")

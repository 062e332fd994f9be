"""Public video benchmarks: each benchmark's reading and its official scoring, in one module.

One module per benchmark (`vstar.py`, `charades_sta.py`, ...), as lmms-eval keeps a task's
reading and scoring together. `videoseek convert --from NAME` and `videoseek eval RUN
--benchmark NAME` look the name up in `BENCHMARKS` and import the module only then.

Contract of a module. Reading (the same contract as `videoseek.envs.convert`'s own converters,
so `convert_files` gives benchmarks the same bad-row reporting, --strict, --limit and id handling):

    FIELDS: dict[str, str]      # source field -> VideoSample field, shown by `convert --show-mapping`
    def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample
        # raise convert.RowError(field, reason) for a bad row, convert.SkipRow(reason) to skip one;
        # keep the benchmark's own ids, categories and answer fields in `metadata["benchmark"]`.
    def iter_source_records(path) -> Iterator[tuple[str, Any]]   # optional: when the benchmark's
        # file is not one record per JSON/JSONL/parquet row (e.g. V-STaR nests, Charades-STA is text)

Scoring (each reproduces that benchmark's own evaluation script: the same answer extraction, IoU,
averaging and category breakdowns; each metric's docstring cites the script):

    def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict
        # the official numbers (overall and per category), plain JSON-able values
    def format_table(metrics: dict) -> str
        # the table as the benchmark's paper reports it (markdown)

`_mc.py` holds the multiple-choice readers' shared row building, `_scoring.py` the scorers'
shared helpers. Both halves read and write only `envs` types (`VideoSample`, `Trajectory`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# benchmark name (the --from / --benchmark spelling) -> module in this package
BENCHMARKS: dict[str, str] = {
    "vstar": "vstar",
    "charades-sta": "charades_sta",
    "charades-timelens": "charades_timelens",
    "videomme": "videomme",
    "mvbench": "mvbench",
    "lvbench": "lvbench",
    "video-holmes": "video_holmes",
    "vsi-bench": "vsi_bench",
    "video-mme-v2": "video_mme_v2",
    "videommmu": "videommmu",
}


def benchmark_module(name: str) -> ModuleType:
    """The module of benchmark `name` (ValueError listing the names if unknown)."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
    return importlib.import_module(f"{__name__}.{BENCHMARKS[name]}")

"""Public video benchmarks: each benchmark's reading and its official scoring, in one module.

One module per benchmark (`vstar.py`, `charades_sta.py`, ...), as lmms-eval keeps a task's
reading and scoring together. `BENCHMARKS` is the registry: `videoseek convert --from NAME` and
`videoseek eval RUN --benchmark NAME` take their choices from it, and import a module only when
its name is chosen (listing the names imports none).

Contract of a module. Reading (the same contract as `videoseek.envs.convert`'s own converters,
so `convert_files` gives benchmarks the same bad-row reporting, --strict, --limit and id handling;
the types and helpers come from `videoseek.envs.source_records`, never from `convert`, which
imports this package):

    FIELDS: dict[str, str]      # source field -> VideoSample field, shown by `convert --show-mapping`
    def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample
        # raise RowError(field, reason) for a bad row, SkipRow(reason) to skip one; keep the
        # benchmark's own ids, categories and answer fields in `metadata["benchmark"]`.
    def iter_source_records(path) -> Iterator[tuple[str, Any]]   # optional: when the benchmark's
        # input is not one record per JSON/JSONL/parquet row (e.g. V-STaR nests, Charades-STA is
        # text, VideoMMMU is a folder of per-track files)
    SUBTITLES: str              # optional: what `convert --subtitles DIR` holds for this benchmark
        # (its with-subtitles setting, read through `opts.subtitle_dir`); without it --subtitles is refused

Scoring (each reproduces that benchmark's own evaluation script: the same answer extraction, IoU,
averaging and category breakdowns; each metric's docstring cites the script):

    def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict
        # the official numbers (overall and per category), plain JSON-able values
    def format_table(metrics: dict) -> str
        # the table as the benchmark's paper reports it (markdown)

`_mc.py` holds the multiple-choice readers' shared row building, `_scoring.py` the scorers'
shared helpers. Both halves read and write only `envs` types (`VideoSample`, `Trajectory`).

Adding a benchmark: write `envs/benchmarks/<name>.py` to the contract above, add its line to
`BENCHMARKS`, and add a test that converts a small annotation file laid out as the benchmark
ships it and checks the scorer against numbers its official script gave on the same replies
(`tests/envs/test_benchmarks_mc.py`, `tests/envs/test_benchmarks_grounding.py`).
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


def subtitled_benchmarks() -> list[str]:
    """The benchmarks with a with-subtitles setting (a module-level `SUBTITLES`), in registry
    order. Imports every benchmark module (one that cannot be imported is left out): call it only
    to word an error.
    """
    names = []
    for name in BENCHMARKS:
        try:
            module = benchmark_module(name)
        except ImportError:
            continue
        if getattr(module, "SUBTITLES", None):
            names.append(name)
    return names

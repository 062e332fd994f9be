"""Converters of public video benchmarks' annotation files into `VideoSample` rows.

One module per benchmark (`vstar.py`, `charades_sta.py`, ...), each with one job: read that
benchmark's published annotation format. `videoseek convert --from NAME` looks the name up in
`BENCHMARK_CONVERTERS` and imports the module only then.

Contract of a module (the same as `videoseek.envs.convert`'s own converters, so `convert_files`
gives benchmarks the same bad-row reporting, --strict, --limit and id handling):

    FIELDS: dict[str, str]      # source field -> VideoSample field, shown by `convert --show-mapping`
    def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample
        # raise convert.RowError(field, reason) for a bad row, convert.SkipRow(reason) to skip one;
        # keep the benchmark's own ids, categories and answer fields in `metadata["benchmark"]`.
    def iter_source_records(path) -> Iterator[tuple[str, Any]]   # optional: when the benchmark's
        # file is not one record per JSON/JSONL/parquet row (e.g. V-STaR nests, Charades-STA is text)
"""

from __future__ import annotations

import importlib
from types import ModuleType

# benchmark name (the --from / --benchmark spelling) -> module in this package
BENCHMARK_CONVERTERS: dict[str, str] = {
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


def converter_module(name: str) -> ModuleType:
    """The converter module of benchmark `name` (ValueError listing the names if unknown)."""
    if name not in BENCHMARK_CONVERTERS:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARK_CONVERTERS)}")
    return importlib.import_module(f"{__name__}.{BENCHMARK_CONVERTERS[name]}")

"""Benchmark (not part of the suite: `pytest -m benchmark tests/viewer/test_bench.py -s`).

10,000 episodes of real size (copies of the fixture's episodes, about 3 KB a line): how long the
byte-offset index takes to build, and what a page of the list and one episode cost against
re-reading the whole file, which is what a viewer without the index would do per request.
"""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs

import pytest
from videoseek.viewer.fixtures import write_fixture_run
from videoseek.viewer.server import ViewerApp


def best_of(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


@pytest.mark.benchmark
def test_ten_thousand_episodes(tmp_path):
    run = tmp_path / "run"
    write_fixture_run(run, n_samples=2, group_size=4)
    base = [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]
    with (run / "trajectories.jsonl").open("w") as fh:
        for k in range(10_000):
            ep = dict(base[k % len(base)], episode_id=f"e{k:05d}", reward=float(k % 97))
            ep["group"] = dict(ep["group"], id=f"grp{k // 8}")
            fh.write(json.dumps(ep) + "\n")
    size = (run / "trajectories.jsonl").stat().st_size
    app = ViewerApp([run])
    build = best_of(lambda: app.run("A"), 1)
    full_parse = best_of(lambda: [json.loads(x) for x in (run / "trajectories.jsonl").open("rb")], 3)
    queries = {
        "first page": "run=A",
        "wrong, by reward, page 20": "run=A&outcome=wrong&sort=-reward&page=20",
        "text search": "run=A&q=e099&sort=-score",
        "reward range": "run=A&reward_min=10&reward_max=20&per_page=100&page=3",
    }
    print(f"\n{size / 1e6:.1f} MB, index build {build:.2f} s, full re-parse {full_parse * 1e3:.0f} ms")
    for name, q in queries.items():
        t = best_of(lambda q=q: app.api_episodes(parse_qs(q, keep_blank_values=True)))
        print(f"  {name:28s} {t * 1e3:7.2f} ms  ({full_parse / t:6.0f}x faster than a re-parse)")
        assert t < full_parse
    t = best_of(lambda: app.api_episode({"run": ["A"], "i": ["7777"]}))
    print(f"  {'one episode':28s} {t * 1e3:7.2f} ms  ({full_parse / t:6.0f}x faster than a re-parse)")
    assert t < full_parse

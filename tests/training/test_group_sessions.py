"""Group coordination of concurrent agent-loop sessions (no verl needed)."""

from __future__ import annotations

import asyncio

import pytest
from videoseek.rewards import EpisodeSummary
from videoseek.training.verl_plugin.group import GroupCoordinator


def _summary(prediction: str) -> EpisodeSummary:
    return EpisodeSummary(prediction=prediction, assistant_turns=[prediction], calls=[], invalid_calls=0, duration=10.0)


async def _session(coord, key, sid, delay, calls, perturbed_sizes, crash=False):
    group = coord.join(key, sid)  # synchronous, before the first await, as the agent loop does

    async def make_perturbed(size):
        perturbed_sizes.append(size)
        await asyncio.sleep(0.01)
        return [f"p{i}" for i in range(size)]

    task = coord.start_perturbed(group, make_perturbed)
    try:
        await asyncio.sleep(delay)
        if crash:
            raise RuntimeError("env failed")
        perturbed = await task

        async def score(origins):
            calls.append([o.prediction for o in origins])
            return [(float(len(perturbed) * 10 + i), {"i": float(i)}) for i, _ in enumerate(origins)]

        return await coord.reward(group, sid, _summary(f"s{sid}"), score)
    except RuntimeError:
        coord.leave(group, sid)
        return None


def test_group_scored_once_in_session_order_and_released():
    async def main():
        coord = GroupCoordinator()
        calls, sizes = [], []
        results = await asyncio.gather(*[_session(coord, "u1", sid, d, calls, sizes) for sid, d in [(2, 0.03), (0, 0.0), (1, 0.05)]])
        return coord, calls, sizes, results

    coord, calls, sizes, results = asyncio.run(main())
    assert calls == [["s0", "s1", "s2"]]  # one scoring call, origins in session order
    assert sizes == [3]  # the perturbed group started once, sized like the origin group
    assert [r[0] for r in results] == [32.0, 30.0, 31.0]  # each session gets its own score
    assert len(coord) == 0


def test_crashed_session_does_not_block_its_siblings():
    async def main():
        coord = GroupCoordinator()
        calls, sizes = [], []
        coros = [_session(coord, "u", 0, 0.0, calls, sizes), _session(coord, "u", 1, 0.02, calls, sizes, crash=True), _session(coord, "u", 2, 0.04, calls, sizes)]
        return coord, calls, await asyncio.wait_for(asyncio.gather(*coros), timeout=5)

    coord, calls, results = asyncio.run(main())
    assert calls == [["s0", "s2"]]
    assert results[1] is None and results[0][0] == 30.0 and results[2][0] == 31.0
    assert len(coord) == 0


def test_last_session_crashing_still_releases_the_others():
    async def main():
        coord = GroupCoordinator()
        calls, sizes = [], []
        coros = [_session(coord, "u", 0, 0.0, calls, sizes), _session(coord, "u", 1, 0.05, calls, sizes, crash=True)]
        return calls, await asyncio.wait_for(asyncio.gather(*coros), timeout=5)

    calls, results = asyncio.run(main())
    assert calls == [["s0"]] and results[0][0] == 20.0 and results[1] is None


def test_groups_with_different_keys_are_independent():
    async def main():
        coord = GroupCoordinator()
        calls, sizes = [], []
        coros = [_session(coord, k, s, 0.01 * s, calls, sizes) for k in ("a", "b") for s in range(2)]
        await asyncio.gather(*coros)
        return calls, sizes

    calls, sizes = asyncio.run(main())
    assert sorted(calls) == [["s0", "s1"], ["s0", "s1"]] and sizes == [2, 2]


def test_scoring_error_reaches_every_session():
    async def main():
        coord = GroupCoordinator()

        async def one(sid):
            group = coord.join("g", sid)

            async def score(origins):
                raise ValueError("bad group")

            return await coord.reward(group, sid, _summary("x"), score)

        return await asyncio.gather(one(0), one(1), return_exceptions=True)

    results = asyncio.run(main())
    assert all(isinstance(r, ValueError) for r in results)


@pytest.mark.parametrize("n", [1, 4])
def test_group_of_any_size_completes(n):
    async def main():
        coord = GroupCoordinator()
        calls, sizes = [], []
        return await asyncio.gather(*[_session(coord, "k", s, 0.0, calls, sizes) for s in range(n)]), sizes

    results, sizes = asyncio.run(main())
    assert len(results) == n and sizes == [n]

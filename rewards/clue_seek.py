"""CS-GRPO clue-seek tool reward (Open-o3-Video-v2, seed 003, "Model Training", Stage 2).

The seed scores how the accumulated evidence state changes across `crop_video` calls:
"score final clue coverage and give step-wise credit when a later call improves the evidence
state by more than 0.1"; "penalize calls beyond three, near-duplicate intervals (temporal IoU
above 0.7), runs of adjacent fragments, and calls that reduce the evidence state by more than 0.1".

Evidence state (DESIGN.md, shared with `videoseek.envs.EvidenceState` through `intervals`):
R = union of retrieved calls, C = union of clue intervals, both clipped to [0, duration];
coverage = |R∩C|/|C|; E = |R∩C|/|R∪C|; gain g_k = E_k − E_{k−1} with E_0 = 0.

    R_tool = w_cov·coverage_K − w_irr·|R_K − C|/duration + w_gain·#{k: g_k > θ_gain}
             − p_excess·max(0, N − n_free) − p_dup·#duplicates − p_frag·#fragments
             − p_drop·#{k: g_k < −θ_drop} − p_invalid·#invalid,   then max(R_tool, r_min)

             + w_zoom·#{zooms whose box has IoU >= θ_zoom with a key-frame box near its time}

with N the number of calls (valid and invalid, zooms included). The seed gives the thresholds (0.1, 3, 0.7, 0.1)
but no weights; the defaults here make full coverage with a few useful calls worth about 1.0–1.5
and each wasteful call cost 0.1–0.2, so one wasteful call never outweighs the coverage it
bought. Choices where the seed is silent, each a parameter:
- a duplicate is a call with tIoU > 0.7 with ANY earlier call (not only the previous one);
- a fragment is a call whose gap to the previous call is within `adjacency_gap` (0.5 s, about
  one sampled frame; touching or barely overlapping counts) and that is not a duplicate; every
  call that continues a run from its `min_run`-th member on is penalised (default 2: the second
  call of a run already is, since one wider call would have done);
- the first call gets gain credit too (E_0 = 0 is "the state before any call");
- invalid (rejected or malformed) calls count towards the call budget and cost `p_invalid`;
- the seed's evidence state "captures both clue coverage and irrelevant footage", but its final
  score names only coverage: scored alone, one crop of the whole video earns full coverage from
  frames as sparse as the initial ones (GRPO found that in 40 steps, docs/training.md), so the
  footage retrieved outside the clues is charged, as a fraction of the video, at `irrelevant_weight`.

>>> round(clue_seek_reward([(10, 20)], [(12, 18)], duration=60), 4)   # one call covering the clue
1.0333
>>> round(clue_seek_reward([(0, 60)], [(12, 18)], duration=60), 4)   # the whole video: almost no credit
0.1
>>> r, b = clue_seek_reward([(10, 20), (10, 20)], [(12, 18)], 60, return_breakdown=True)
>>> round(r, 4), b["duplicates"]
(0.8333, 1)
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from .grounding import region_iou
from .intervals import Interval, clip, intersection, measure, tiou, union


class ClueSeekParams(BaseModel):
    """Weights and thresholds of `clue_seek_reward` (seed values where the seed gives one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    coverage_weight: float = 1.0
    irrelevant_weight: float = 1.0  # per fraction of the video retrieved outside the clues
    gain_weight: float = 0.1
    gain_threshold: float = 0.1  # seed: "improves the evidence state by more than 0.1"
    free_calls: int = 3  # seed: "calls beyond three"
    excess_penalty: float = 0.1
    duplicate_tiou: float = 0.7  # seed: "temporal IoU above 0.7"
    duplicate_penalty: float = 0.2
    adjacency_gap: float = 0.5
    min_run: int = 2
    fragment_penalty: float = 0.1
    drop_threshold: float = 0.1  # seed: "reduce the evidence state by more than 0.1"
    drop_penalty: float = 0.2
    invalid_penalty: float = 0.1
    # Zooms (the `zoom` tool; no seed has it): credit per zoom whose box overlaps a key-frame box
    # near its time with IoU >= zoom_iou (`grounding.region_iou`, the IoU of grounded thinking, seed 003).
    zoom_weight: float = 0.1  # = gain_weight: looking at the clue's region is worth what a useful crop is
    zoom_iou: float = 0.5  # the usual detection hit threshold (PASCAL VOC)
    zoom_time_gate: float = 2.0  # seconds between the zoomed frame and a key frame (grounding's time_gate)
    min_reward: float = -1.0
    # Not in the seed (default off, the paper's reward): DeepEyes' conditional tool reward. With it on,
    # a wrong answer keeps the search's costs (a negative clue-seek) but not its credit, so a
    # policy cannot buy clue-seek reward with accuracy (applied by `compose.episode_components`).
    paid_if_correct: bool = False


def evidence_trace(calls: Sequence[Sequence[float]], clue_intervals: Sequence[Sequence[float]], duration: float) -> list[dict]:
    """Per call: clipped span, E before/after, gain, coverage after. Calls outside the video are skipped.

    >>> [round(t["gain"], 3) for t in evidence_trace([(9, 13), (40, 50)], [(10, 12)], 60)]
    [0.5, -0.357]
    """
    clues = union(iv for iv in (clip(c, 0.0, duration) for c in clue_intervals) if iv is not None)
    clue_len = measure(clues)
    retrieved: list[Interval] = []
    before = 0.0
    out = []
    for call in calls:
        span = clip(call, 0.0, duration)
        if span is None:
            continue
        retrieved = union([*retrieved, span])
        after = tiou(retrieved, clues)
        hit = measure(intersection(retrieved, clues))
        coverage = hit / clue_len if clue_len > 0 else 0.0
        # without clue annotations nothing can be called irrelevant
        irrelevant = (measure(retrieved) - hit) / duration if clue_len > 0 and duration > 0 else 0.0
        out.append({"span": span, "score_before": before, "score_after": after, "gain": after - before, "coverage": coverage,
                    "irrelevant": irrelevant})  # fmt: skip
        before = after
    return out


def call_geometry(spans: Sequence[Interval], duplicate_tiou: float = 0.7, adjacency_gap: float = 0.5) -> list[dict]:
    """Per call: `duplicate_of` (first earlier call with tIoU > threshold) and `adjacent` (to the previous call).

    Same rule as `videoseek.envs.EvidenceState.add`.

    >>> [(g["duplicate_of"], g["adjacent"]) for g in call_geometry([(0, 5), (5, 9), (0, 5.2)])]
    [(None, False), (None, True), (0, False)]
    """
    out = []
    for k, span in enumerate(spans):
        dup = next((i for i in range(k) if tiou([span], [spans[i]]) > duplicate_tiou), None)
        adjacent = False
        if k > 0:
            prev = spans[k - 1]
            gap = max(span[0] - prev[1], prev[0] - span[1])
            adjacent = abs(gap) <= adjacency_gap and dup is None
        out.append({"duplicate_of": dup, "adjacent": adjacent})
    return out


def _fragments(adjacent: Sequence[bool], min_run: int) -> int:
    """Calls that are at least the `min_run`-th member of a run of adjacent calls."""
    count, run = 0, 1
    for a in adjacent:
        run = run + 1 if a else 1
        if a and run >= min_run:
            count += 1
    return count


def clue_seek_reward(
    calls: Sequence[Sequence[float]],
    clue_intervals: Sequence[Sequence[float]],
    duration: float,
    invalid_calls: int = 0,
    params: ClueSeekParams | None = None,
    return_breakdown: bool = False,
    zooms: Sequence[tuple[float, Sequence[float]]] = (),
    key_frames: Sequence = (),
    **overrides: float,
) -> float | tuple[float, dict]:
    """CS-GRPO tool reward of one episode's calls (in call order, seconds).

    `params` or keyword overrides (e.g. `duplicate_penalty=0.3`) set the weights and thresholds
    (see `ClueSeekParams`). `zooms` are the accepted `zoom` calls as (time, box), scored against
    the sample's `key_frames` (boxes in fractions of the frame). With `return_breakdown=True`
    returns (reward, breakdown) where the breakdown has the counts, each term and the per-call gains.

    >>> clue_seek_reward([], [(2, 4)], 10, zooms=[(3.0, [0.1, 0.1, 0.3, 0.3])],
    ...                  key_frames=[{"time": 3.0, "boxes": {"label": [0.1, 0.1, 0.3, 0.3]}}])
    0.1
    """
    p = params or ClueSeekParams()
    if overrides:
        p = ClueSeekParams(**{**p.model_dump(), **overrides})
    trace = evidence_trace(calls, clue_intervals, duration)
    spans = [t["span"] for t in trace]
    geometry = call_geometry(spans, p.duplicate_tiou, p.adjacency_gap)
    gains = [t["gain"] for t in trace]
    coverage = trace[-1]["coverage"] if trace else 0.0
    irrelevant = trace[-1]["irrelevant"] if trace else 0.0
    n_calls = len(spans) + len(zooms) + int(invalid_calls)
    zoom_ious = [region_iou(t, box, key_frames, p.zoom_time_gate) for t, box in zooms]
    counts = {
        "calls": n_calls,
        "useful": sum(g > p.gain_threshold for g in gains),
        "excess": max(0, n_calls - p.free_calls),
        "duplicates": sum(g["duplicate_of"] is not None for g in geometry),
        "fragments": _fragments([g["adjacent"] for g in geometry], p.min_run),
        "drops": sum(g < -p.drop_threshold for g in gains),
        "invalid": int(invalid_calls),
        "zooms": len(zooms),
        "zoom_hits": sum(iou is not None and iou >= p.zoom_iou for iou in zoom_ious),
    }
    terms = {
        "coverage_term": p.coverage_weight * coverage,
        "irrelevant_term": -p.irrelevant_weight * irrelevant,
        "gain_term": p.gain_weight * counts["useful"],
        "excess_term": -p.excess_penalty * counts["excess"],
        "duplicate_term": -p.duplicate_penalty * counts["duplicates"],
        "fragment_term": -p.fragment_penalty * counts["fragments"],
        "drop_term": -p.drop_penalty * counts["drops"],
        "invalid_term": -p.invalid_penalty * counts["invalid"],
        "zoom_term": p.zoom_weight * counts["zoom_hits"],
    }
    reward = max(p.min_reward, sum(terms.values()))
    if not return_breakdown:
        return reward
    breakdown = {
        "coverage": coverage,
        "irrelevant": irrelevant,
        "evidence": trace[-1]["score_after"] if trace else 0.0,
        **counts,
        **terms,
        "gains": gains,
        "duplicate_of": [g["duplicate_of"] for g in geometry],
        "adjacent": [g["adjacent"] for g in geometry],
    }
    return reward, breakdown

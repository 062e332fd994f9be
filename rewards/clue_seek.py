"""CS-GRPO clue-seek tool reward (Open-o3-Video-v2, seed 003, "Model Training", Stage 2).

The seed scores how the accumulated evidence state changes across `crop_video` calls:
"score final clue coverage and give step-wise credit when a later call improves the evidence
state by more than 0.1"; "penalize calls beyond three, near-duplicate intervals (temporal IoU
above 0.7), runs of adjacent fragments, and calls that reduce the evidence state by more than 0.1".

Evidence state (DESIGN.md; `EvidenceState` below, the one implementation: the env records each
call's gain, duplicate and fragment flags from it, `videoseek.envs.EvidenceState` is this class):
R = union of retrieved calls, C = union of clue intervals, both clipped to [0, duration];
coverage = |R∩C|/|C|; E = |R∩C|/|R∪C|; gain g_k = E_k − E_{k−1} with E_0 = 0. Its thresholds
(`duplicate_tiou`, `adjacency_gap`, `zoom_time_gate`) are the episode's `ClueSeekParams`; with
`coverage_by="frames"` the hit R∩C keeps only the clue intervals a returned frame lies in.

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
from dataclasses import asdict, dataclass, field

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
    # Not in the seed (default off, the seed's "runs of adjacent fragments" as written): with it on, a
    # call after one that added no clue coverage is a sweep, not a fragment, however close: the
    # window before showed nothing, and one wider call instead would have shown fewer frames per
    # second (a call returns at most frames_per_call frames), not the same evidence.
    sweep_exempt: bool = False
    drop_threshold: float = 0.1  # seed: "reduce the evidence state by more than 0.1"
    drop_penalty: float = 0.2
    invalid_penalty: float = 0.1
    # Zooms (the `zoom` tool; no seed has it): credit per zoom whose box overlaps a key-frame box
    # near its time with IoU >= zoom_iou (`grounding.region_iou`, the IoU of grounded thinking, seed 003).
    zoom_weight: float = 0.1  # = gain_weight: looking at the clue's region is worth what a useful crop is
    zoom_iou: float = 0.5  # the usual detection hit threshold (PASCAL VOC)
    zoom_time_gate: float = 2.0  # seconds between the zoomed frame and a key frame (grounding's time_gate)
    min_reward: float = -1.0
    # What "coverage" counts (the seed's word, not its pixels): "span", the seed's interval coverage,
    # or "frames", where a clue interval counts only once a frame a call returned lies in it: a wide
    # span whose sparse frames step over a 1 s clue showed the model nothing, yet "span" credits it
    # (docs/experiments/2026-12-06-coverage-by-frames.md). Frames of an unrecorded call count as the span.
    coverage_by: Literal["span", "frames"] = "span"
    # Not in the seed (default off, the paper's reward): DeepEyes' conditional tool reward. With it on,
    # a wrong answer keeps the search's costs (a negative clue-seek) but not its credit, so a
    # policy cannot buy clue-seek reward with accuracy (applied by `compose.episode_components`).
    paid_if_correct: bool = False
    # Not in the seed (default 0, off): with turn-level credit (`--advantage turn`), the step reward of a
    # turn whose call repeats an earlier one (`duplicate_of`) or that the env refused (a malformed or
    # rejected call) is -turn_penalty instead of 0 (`agents.groups.turn_rewards_of`). The seed charges
    # such calls in the episode's term (duplicate_penalty, invalid_penalty), which turn-level credit
    # spreads over every turn alike; in the unit of the step signal (1 per useful call).
    # At 1 it taught answering after two misses (docs/experiments/2026-12-07-coverage-by-frames-four-seeds.md);
    # learn_cpu sets 0.25, which met issue 37's targets in seeds 0-3 (docs/experiments/2026-12-07-turn-penalty-four-seeds.md).
    turn_penalty: float = Field(default=0.0, ge=0.0)


# ---- the evidence state: the one implementation of the evidence geometry ---------------------------
@dataclass(frozen=True)
class CallEvidence:
    """What one accepted span call did to the evidence state (the env records it as `Turn.call`)."""

    index: int
    start: float
    end: float
    score_before: float
    score_after: float
    coverage: float
    precision: float
    best_prior_tiou: float  # max tIoU with any earlier call (near-duplicate detection)
    duplicate_of: int | None  # index of the first earlier call with tIoU above `duplicate_tiou`
    adjacent_to_previous: bool  # touches or nearly touches the previous call (fragmented seeking)
    irrelevant: float = 0.0  # footage retrieved so far outside the clues, as a fraction of the video

    @property
    def gain(self) -> float:
        return self.score_after - self.score_before

    def as_dict(self) -> dict:
        d = asdict(self)
        d["gain"] = self.gain
        return d


@dataclass
class EvidenceState:
    """The accumulated clue-interval evidence of one episode; the env and `clue_seek_reward` both read it.

    R is the union of retrieved spans, C the union of clue intervals, both clipped to
    [0, duration]. coverage = |R∩C|/|C|, precision = |R∩C|/|R|, evidence score E = |R∩C|/|R∪C|
    (temporal IoU of the unions). After call k the gain is g_k = E_k − E_{k−1}; E rather than
    coverage is the state, so a call that adds only irrelevant footage lowers it.

    Arguments:
        clue_intervals: answer-relevant spans in seconds.
        duration: video length in seconds; intervals are clipped to [0, duration].
        key_frames: the sample's key frames ({time, boxes}); spatial looks (`add_region`) are
            scored against their boxes.
        params: the thresholds, the episode's `RewardConfig.clue_seek`: a call with tIoU above
            `duplicate_tiou` with an earlier call is a near-duplicate (seed: 0.7); a call whose gap
            to the previous one (or overlap with it) is at most `adjacency_gap` seconds continues
            a run of adjacent fragments; a key frame's boxes count for a look within
            `zoom_time_gate` seconds of it.

    Spatial evidence (a `zoom` at one frame) does not change the temporal state: a frame is an
    instant, not a span. `add_region` records the region and its IoU with the key-frame boxes.

    With `params.coverage_by="frames"` the hit is R ∩ S instead of R ∩ C, S the union of the clue
    intervals (the connected parts of C) that a frame returned by a call lies in: `add(start, end,
    frame_times)` passes the times of the frames the call showed. `irrelevant` stays R − C.

    >>> ev = EvidenceState(clue_intervals=[(10, 12)], duration=60)
    >>> round(ev.add(9, 13).gain, 3)
    0.5
    >>> ev.coverage, round(ev.precision, 2)
    (1.0, 0.5)
    >>> round(ev.add(40, 50).gain, 3)   # irrelevant footage lowers E
    -0.357
    >>> ev = EvidenceState([(10, 11)], 60, params=ClueSeekParams(coverage_by="frames"))
    >>> ev.add(0, 30, frame_times=[0, 7.5, 15, 22.5]).coverage   # 4 frames 7.5 s apart step over the 1 s clue
    0.0
    >>> ev.add(8, 12, frame_times=[8, 9.5, 10.5, 12]).coverage
    1.0
    """

    clue_intervals: Sequence[Sequence[float]]
    duration: float
    key_frames: Sequence = ()
    params: ClueSeekParams = field(default_factory=ClueSeekParams)
    calls: list[CallEvidence] = field(default_factory=list)
    regions: list[tuple[float, list[float], float | None]] = field(default_factory=list)  # (time, box, IoU)
    _clues: list[Interval] = field(init=False, repr=False)
    _retrieved: list[Interval] = field(init=False, repr=False, default_factory=list)
    _seen: list[Interval] = field(init=False, repr=False, default_factory=list)  # clue parts a frame lay in ("frames")
    _frames: list[tuple[float, ...] | None] = field(init=False, repr=False, default_factory=list)  # per call

    def __post_init__(self) -> None:
        clipped = (clip(iv, 0.0, self.duration) for iv in self.clue_intervals)
        self._clues = union(iv for iv in clipped if iv is not None)

    # ---- state -------------------------------------------------------------------------------
    @property
    def clues(self) -> list[Interval]:
        return list(self._clues)

    @property
    def retrieved(self) -> list[Interval]:
        return list(self._retrieved)

    @property
    def hit(self) -> float:
        """|R∩C|, or |R∩S| with `coverage_by="frames"` (S: the clue intervals a returned frame lay in)."""
        return measure(intersection(self._retrieved, self._seen if self.params.coverage_by == "frames" else self._clues))

    @property
    def coverage(self) -> float:
        c = measure(self._clues)
        return self.hit / c if c > 0 else 0.0

    @property
    def precision(self) -> float:
        r = measure(self._retrieved)
        return self.hit / r if r > 0 else 0.0

    @property
    def irrelevant(self) -> float:
        """|R − C| / duration; 0 without clue annotations (nothing can be called irrelevant then)."""
        if measure(self._clues) <= 0 or self.duration <= 0:
            return 0.0
        return (measure(self._retrieved) - measure(intersection(self._retrieved, self._clues))) / self.duration

    @property
    def score(self) -> float:
        if self.params.coverage_by == "span":
            return tiou(self._retrieved, self._clues)
        total = measure(self._retrieved + self._clues)
        return self.hit / total if total > 0 else 0.0

    def snapshot(self) -> dict[str, float]:
        return {"coverage": self.coverage, "precision": self.precision, "score": self.score}

    # ---- transitions -------------------------------------------------------------------------
    def add(self, start: float, end: float, frame_times: Sequence[float] | None = None) -> CallEvidence:
        """Record one span call; the span is clipped to [0, duration]. Raises on an empty span.
        `frame_times`: the times of the frames the call returned (what `coverage_by="frames"` reads;
        None: not recorded, the span's clues count as seen).

        The geometry rules, here only: a duplicate is a call with tIoU > `duplicate_tiou` with ANY
        earlier call (the first such call is named); a call is adjacent to the previous one when
        the gap between them (or their overlap) is at most `adjacency_gap` and it is no duplicate
        (with `sweep_exempt`, and the previous call raised the coverage: `adjacent_to_previous`
        is what continues a run of fragments).
        """
        span = clip((start, end), 0.0, self.duration)
        if span is None:
            raise ValueError(f"crop [{start}, {end}] has no overlap with the video [0, {self.duration}]")
        before = self.score
        prior = [tiou([span], [(c.start, c.end)]) for c in self.calls]
        best = max(prior, default=0.0)
        dup = next((i for i, v in enumerate(prior) if v > self.params.duplicate_tiou), None)
        adjacent = False
        if self.calls:
            p = self.calls[-1]
            gap = max(span[0] - p.end, p.start - span[1])
            # Touching or nearly touching, not substantially overlapping: a small step along the video.
            adjacent = abs(gap) <= self.params.adjacency_gap and dup is None
            if self.params.sweep_exempt:  # ... unless it steps on past a call that found no clue
                adjacent = adjacent and p.coverage > (self.calls[-2].coverage if len(self.calls) > 1 else 0.0)
        self._retrieved = union([*self._retrieved, span])
        self._frames.append(None if frame_times is None else tuple(float(t) for t in frame_times))
        if self.params.coverage_by == "frames":  # only this mode reads which clue parts were seen
            if frame_times is None:
                shown = [c for c in self._clues if min(c[1], span[1]) > max(c[0], span[0])]
            else:
                shown = [c for c in self._clues if any(c[0] <= t <= c[1] for t in frame_times)]
            self._seen = union([*self._seen, *shown])
        rec = CallEvidence(
            index=len(self.calls),
            start=span[0],
            end=span[1],
            score_before=before,
            score_after=self.score,
            coverage=self.coverage,
            precision=self.precision,
            best_prior_tiou=best,
            duplicate_of=dup,
            adjacent_to_previous=adjacent,
            irrelevant=self.irrelevant,
        )
        self.calls.append(rec)
        return rec

    def add_region(self, time: float, box: Sequence[float]) -> float | None:
        """Record a look at the region `box` ([x1, y1, x2, y2], fractions) of the frame at `time`;
        its IoU with the key-frame boxes near that time (`grounding.region_iou`), None without boxes."""
        iou = region_iou(time, box, self.key_frames, self.params.zoom_time_gate)
        self.regions.append((float(time), [float(v) for v in box], iou))
        return iou

    def call_spans(self) -> list[Interval]:
        return [(c.start, c.end) for c in self.calls]

    def call_frames(self) -> list[tuple[float, ...] | None]:
        """The frame times each span call returned, in `call_spans` order (None: not recorded)."""
        return list(self._frames)

    def region_looks(self) -> list[tuple[float, list[float]]]:
        """The spatial looks in order, as (time, box): what the clue-seek reward's zoom term reads."""
        return [(t, list(b)) for t, b, _ in self.regions]


def evidence_trace(
    calls: Sequence[Sequence[float]], clue_intervals: Sequence[Sequence[float]], duration: float, params: ClueSeekParams | None = None
) -> list[CallEvidence]:
    """Each call replayed on an `EvidenceState` with `params`: its `CallEvidence` (clipped span, E
    before and after, gain, coverage, duplicate and adjacency). Calls outside the video are skipped.

    >>> [round(t.gain, 3) for t in evidence_trace([(9, 13), (40, 50)], [(10, 12)], 60)]
    [0.5, -0.357]
    >>> [(t.duplicate_of, t.adjacent_to_previous) for t in evidence_trace([(0, 5), (5, 9), (0, 5.2)], [], 60)]
    [(None, False), (None, True), (0, False)]
    >>> sweep = [(0, 2.5), (2.5, 5), (5, 7.5)]   # two windows that missed the clue, then the one with it
    >>> [t.adjacent_to_previous for t in evidence_trace(sweep, [(6, 7)], 10)]
    [False, True, True]
    >>> [t.adjacent_to_previous for t in evidence_trace(sweep, [(6, 7)], 10, ClueSeekParams(sweep_exempt=True))]
    [False, False, False]
    """
    state = EvidenceState(clue_intervals, duration, params=params or ClueSeekParams())
    return [state.add(*call[:2]) for call in calls if clip(call, 0.0, duration) is not None]


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
    call_frames: Sequence[Sequence[float] | None] = (),
    **overrides: float,
) -> float | tuple[float, dict]:
    """CS-GRPO tool reward of one episode's calls (in call order, seconds).

    `params` or keyword overrides (e.g. `duplicate_penalty=0.3`) set the weights and thresholds
    (see `ClueSeekParams`). `zooms` are the accepted `zoom` calls as (time, box), scored against
    the sample's `key_frames` (boxes in fractions of the frame). `call_frames` are the times of the
    frames each call returned, aligned with `calls` (what `coverage_by="frames"` reads; a missing
    entry or None: the span counts). With `return_breakdown=True`
    returns (reward, breakdown) where the breakdown has the counts, each term and the per-call gains.

    >>> clue_seek_reward([], [(2, 4)], 10, zooms=[(3.0, [0.1, 0.1, 0.3, 0.3])],
    ...                  key_frames=[{"time": 3.0, "boxes": {"label": [0.1, 0.1, 0.3, 0.3]}}])
    0.1
    """
    p = params or ClueSeekParams()
    if overrides:
        p = ClueSeekParams(**{**p.model_dump(), **overrides})
    state = EvidenceState(clue_intervals, duration, key_frames=key_frames, params=p)
    frames = [*call_frames, *[None] * max(0, len(calls) - len(call_frames))]
    trace = [state.add(*call[:2], frame_times=f) for call, f in zip(calls, frames) if clip(call, 0.0, duration) is not None]  # outside the video: skipped
    zoom_ious = [state.add_region(t, box) for t, box in zooms]
    gains = [t.gain for t in trace]
    coverage = trace[-1].coverage if trace else 0.0
    irrelevant = trace[-1].irrelevant if trace else 0.0
    n_calls = len(trace) + len(zooms) + int(invalid_calls)
    counts = {
        "calls": n_calls,
        "useful": sum(g > p.gain_threshold for g in gains),
        "excess": max(0, n_calls - p.free_calls),
        "duplicates": sum(t.duplicate_of is not None for t in trace),
        "fragments": _fragments([t.adjacent_to_previous for t in trace], p.min_run),
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
        "evidence": trace[-1].score_after if trace else 0.0,
        **counts,
        **terms,
        "gains": gains,
        "duplicate_of": [t.duplicate_of for t in trace],
        "adjacent": [t.adjacent_to_previous for t in trace],
    }
    return reward, breakdown

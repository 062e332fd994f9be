"""`EvidenceState`: the accumulated clue-interval evidence of CS-GRPO (Open-o3-Video-v2, seed 003).

R is the union of retrieved crop intervals, C the union of clue intervals, both clipped to
[0, duration]. coverage = |R∩C|/|C|, precision = |R∩C|/|R|, evidence score E = |R∩C|/|R∪C|
(temporal IoU of the unions). After call k the gain is g_k = E_k − E_{k−1}; E rather than coverage
is the state, so a call that adds only irrelevant footage lowers it.

>>> ev = EvidenceState(clue_intervals=[(10, 12)], duration=60)
>>> round(ev.add(9, 13).gain, 3)
0.5
>>> ev.coverage, round(ev.precision, 2)
(1.0, 0.5)
>>> round(ev.add(40, 50).gain, 3)   # irrelevant footage lowers E
-0.357
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from videoseek.rewards.grounding import region_iou
from videoseek.rewards.intervals import Interval, clip, intersection, measure, tiou, union


@dataclass(frozen=True)
class CallEvidence:
    """What one accepted crop call did to the evidence state."""

    index: int
    start: float
    end: float
    score_before: float
    score_after: float
    coverage: float
    precision: float
    best_prior_tiou: float  # max tIoU with any earlier call (near-duplicate detection)
    duplicate_of: int | None  # index of the earlier call with tIoU above the duplicate threshold
    adjacent_to_previous: bool  # touches or nearly touches the previous call (fragmented seeking)

    @property
    def gain(self) -> float:
        return self.score_after - self.score_before

    def as_dict(self) -> dict:
        d = asdict(self)
        d["gain"] = self.gain
        return d


@dataclass
class EvidenceState:
    """Tracks the retrieved intervals against the clue intervals of one episode.

    Arguments:
        clue_intervals: answer-relevant spans in seconds.
        duration: video length in seconds; intervals are clipped to [0, duration].
        duplicate_tiou: a call with tIoU above this with an earlier call is a near-duplicate (seed: 0.7).
        adjacency_gap: a call whose gap to the previous call (or overlap with it) is at most this
            many seconds continues a run of adjacent fragments. The seed does
            not give a number; 0.5 s is about one sampled frame at typical crop densities.
        key_frames: the sample's key frames ({time, boxes}); spatial looks (`add_region`) are
            scored against their boxes.
        region_time_gate: seconds between a looked-at frame and a key frame whose boxes count
            (grounded thinking's `time_gate`).

    Spatial evidence (a `zoom` at one frame) does not change the temporal state: a frame is an
    instant, not a span. `add_region` records the region and its IoU with the key-frame boxes.
    """

    clue_intervals: Sequence[Sequence[float]]
    duration: float
    duplicate_tiou: float = 0.7
    adjacency_gap: float = 0.5
    key_frames: Sequence = ()
    region_time_gate: float = 2.0
    calls: list[CallEvidence] = field(default_factory=list)
    regions: list[tuple[float, list[float], float | None]] = field(default_factory=list)  # (time, box, IoU)
    _clues: list[Interval] = field(init=False, repr=False)
    _retrieved: list[Interval] = field(init=False, repr=False, default_factory=list)

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
    def coverage(self) -> float:
        c = measure(self._clues)
        return measure(intersection(self._retrieved, self._clues)) / c if c > 0 else 0.0

    @property
    def precision(self) -> float:
        r = measure(self._retrieved)
        return measure(intersection(self._retrieved, self._clues)) / r if r > 0 else 0.0

    @property
    def score(self) -> float:
        return tiou(self._retrieved, self._clues)

    def snapshot(self) -> dict[str, float]:
        return {"coverage": self.coverage, "precision": self.precision, "score": self.score}

    # ---- transitions -------------------------------------------------------------------------
    def add(self, start: float, end: float) -> CallEvidence:
        """Record one crop call; the span is clipped to [0, duration]. Raises on an empty span."""
        span = clip((start, end), 0.0, self.duration)
        if span is None:
            raise ValueError(f"crop [{start}, {end}] has no overlap with the video [0, {self.duration}]")
        before = self.score
        prior = [tiou([span], [(c.start, c.end)]) for c in self.calls]
        best = max(prior, default=0.0)
        dup = next((i for i, v in enumerate(prior) if v > self.duplicate_tiou), None)
        adjacent = False
        if self.calls:
            p = self.calls[-1]
            gap = max(span[0] - p.end, p.start - span[1])
            # Touching or nearly touching, not substantially overlapping: a small step along the video.
            adjacent = abs(gap) <= self.adjacency_gap and dup is None
        self._retrieved = union([*self._retrieved, span])
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
        )
        self.calls.append(rec)
        return rec

    def add_region(self, time: float, box: Sequence[float]) -> float | None:
        """Record a look at the region `box` ([x1, y1, x2, y2], fractions) of the frame at `time`;
        its IoU with the key-frame boxes near that time (`rewards.grounding.region_iou`), None without boxes."""
        iou = region_iou(time, box, self.key_frames, self.region_time_gate)
        self.regions.append((float(time), [float(v) for v in box], iou))
        return iou

    def call_spans(self) -> list[Interval]:
        return [(c.start, c.end) for c in self.calls]

    def region_looks(self) -> list[tuple[float, list[float]]]:
        """The spatial looks in order, as (time, box): what the clue-seek reward's zoom term reads."""
        return [(t, list(b)) for t, b, _ in self.regions]

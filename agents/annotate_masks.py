"""`videoseek annotate-masks`: VideoMend's offline oracle pre-annotation of DM-GRPO mask patterns.

VideoMend (seed 002, §5.3 "关键 Delta 判定与 Oracle 预标注"): for each training sample, take the
time ranges of the Deltas of its reasoning, zero the pixels of the frames in each range (time
positions kept, the env's `{"kind": "mask"}` perturbation: frames with floor(t) in
[floor(s), floor(e)]), let a strong oracle answer on the masked video, and record
`oracle_correct` — True: the masked frames are not critical (c = 1, the counterfactual test of
DM-GRPO is valid); False: they are critical (c = 0, r_dm is neutral).

Candidate ranges, in order of preference (`candidate_ranges`):
1. ``metadata["mask_candidates"]`` (VideoMend patterns without a label, from `videoseek convert`);
2. the Ref-Delta trace: every ``<time_range>A - B</time_range>`` followed by a ``<delta>``;
3. otherwise, for another reference reasoning: the spans between consecutive cited times
   (``<time>``/``<t>`` tags, else colon-format clock times) — a Delta is the change between two
   References, so consecutive anchors delimit the implied Deltas.
Ranges are clipped to the video, deduplicated, and ranges already in ``mask_patterns`` are skipped.

The oracle is any `Policy` (`--policy hf:PATH`, `vllm:PATH`, or a scripted one). Each candidate
runs `votes` masked episodes; `oracle_correct` is whether the share answered correctly reaches
`threshold` (the seed's single oracle answer is votes = 1). Episodes of all samples advance in
batches, one `policy.act` per turn. The output is written sample by sample, so an interrupted run
resumes where it stopped (`--resume`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO


from videoseek.agents.policy import Policy
from videoseek.envs.sample import DataError, MaskPattern, VideoSample
from videoseek.rewards.timestamps import find_times, parse_span, parse_time

# A time holds no "<": `[^<]*` keeps many unclosed tags linear (a lazy `.*?` rescans to the end from each).
_RANGE_THEN_DELTA = re.compile(r"<time_range>([^<]*)</time_range>\s*[,.:;]?\s*<delta>")
_TIME_TAGS = re.compile(r"<time>([^<]*)</time>|<t>([^<]*)</t>")
# Two ranges closer than this (seconds, both ends) are the same range.
SAME_RANGE_S = 1e-6


# ---- candidate ranges --------------------------------------------------------------------------
def ref_delta_ranges(text: str) -> list[tuple[float, float]]:
    """The time ranges of the Deltas of a Ref-Delta trace (VideoMend §3.3), in order.

    >>> ref_delta_ranges("From <time_range>00:00:01.0 - 00:00:03.5</time_range>, <delta>it falls</delta>.")
    [(1.0, 3.5)]
    """
    out = []
    for m in _RANGE_THEN_DELTA.finditer(text):
        span = parse_span(m.group(1))
        if span is not None:
            out.append(span)
    return out


def anchor_ranges(text: str) -> list[tuple[float, float]]:
    """Spans between consecutive distinct cited times (tagged ones, else clock times).

    >>> anchor_ranges("<obj>cup</obj> at <t>4.0</t>s, then at <t>1.5</t>s and <t>9</t>s")
    [(1.5, 4.0), (4.0, 9.0)]
    """
    tagged = [parse_time((a or b).strip()) for a, b in _TIME_TAGS.findall(text)]
    times = [t for t in tagged if t is not None] if tagged else find_times(text, colon_only=True)
    anchors = sorted(set(times))
    return list(zip(anchors, anchors[1:]))


def candidate_ranges(sample: VideoSample, duration: float | None = None, max_patterns: int | None = None) -> list[tuple[float, float]]:
    """Mask ranges to annotate for `sample`, not yet in its `mask_patterns` (see the module doc)."""
    duration = duration or sample.duration or math.inf
    raw: list[Sequence[float]] = list(sample.metadata.get("mask_candidates") or [])
    if not raw and sample.reference_reasoning:
        raw = ref_delta_ranges(sample.reference_reasoning) or anchor_ranges(sample.reference_reasoning)
    done = [p.time_range for p in sample.mask_patterns]
    out: list[tuple[float, float]] = []
    for span in raw:
        try:
            s, e = max(0.0, float(span[0])), min(duration, float(span[1]))
        except (TypeError, ValueError, IndexError):
            continue
        if not (math.isfinite(s) and math.isfinite(e)) or e <= s:
            continue
        if any(abs(s - a) < SAME_RANGE_S and abs(e - b) < SAME_RANGE_S for a, b in done + out):
            continue
        out.append((s, e))
    return out[:max_patterns] if max_patterns is not None else out


# ---- masked oracle episodes --------------------------------------------------------------------
@dataclass
class AnnotationStats:
    samples: int = 0
    patterns: int = 0
    oracle_correct: int = 0
    without_candidates: int = 0
    failed_patterns: int = 0
    failures: Counter = field(default_factory=Counter)


def annotate_samples(
    samples: Sequence[VideoSample],
    policy: Policy,
    *,
    env_config: Any = None,
    votes: int = 1,
    threshold: float = 0.5,
    max_patterns: int | None = None,
    batch_episodes: int = 64,
    seed: int = 0,
    on_sample: Callable[[VideoSample], None] | None = None,
    progress: bool = False,
    trajectories: Any = None,
) -> AnnotationStats:
    """Annotate every sample's candidate ranges with the oracle `policy`; `on_sample` receives each
    sample (annotated, or unchanged when it has no candidate) as soon as its episodes are done.

    The masked episodes run through the rollout runner's `drive_episodes` (batched policy calls,
    per-episode failure isolation, token-exact history). A pattern whose episodes crash (env or
    policy) is left out and counted, never guessed. With a `trajectories` writer
    (`videoseek.envs.trajectory.TrajectoryWriter`) every episode is recorded.
    """
    from videoseek.agents.rollout import Episode, drive_episodes
    from videoseek.envs.env import EnvConfig

    if votes < 1:
        raise ValueError(f"votes must be at least 1, got {votes}")
    config = env_config or EnvConfig()
    stats = AnnotationStats()
    episodes: list[Episode] = []
    pending: dict[str, list[Episode]] = {}
    ready: list[VideoSample] = []
    for s in samples:
        ranges = candidate_ranges(s, max_patterns=max_patterns)
        if not ranges:
            stats.without_candidates += 1
            ready.append(s)
            continue
        jobs = [
            Episode(s, f"{s.id}/mask{k}/v{v}", s.id, v, {"kind": "mask", "time_range": list(r)}, pattern=k)
            for k, r in enumerate(ranges)
            for v in range(votes)
        ]
        pending[s.id] = jobs
        episodes.extend(jobs)

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(samples), desc="annotate-masks", unit="sample")

    def emit(sample: VideoSample) -> None:
        stats.samples += 1
        if on_sample:
            on_sample(sample)
        if bar:
            bar.update(1)

    def finished(ep: Episode) -> None:
        traj = ep.env.trajectory if ep.env is not None else None
        ep.correct = bool(traj is not None and traj.correct)  # a truncated episode never answered: not correct
        if trajectories is not None and traj is not None:
            traj.failure = ep.failure
            trajectories.write(traj, ep.env.frames_by_turn)
        ep.env = None  # release decoded frames
        group = pending.get(ep.sample.id)
        # Every episode of the sample reported here (a sibling may be done but not yet reported).
        if group is not None and all(x.correct is not None for x in group):
            emit(_label(ep.sample, group, votes, threshold, stats))
            del pending[ep.sample.id]

    for s in ready:
        emit(s)
    drive_episodes(episodes, policy, config, seed=seed, batch_episodes=batch_episodes, on_done=finished)
    if bar:
        bar.close()
    return stats


def _label(sample: VideoSample, jobs: list[Any], votes: int, threshold: float, stats: AnnotationStats) -> VideoSample:
    """The sample with one new `MaskPattern` per candidate whose episodes all finished."""
    patterns = list(sample.mask_patterns)
    by_pattern: dict[int, list[Any]] = {}
    for j in jobs:
        by_pattern.setdefault(j.pattern, []).append(j)
    for k in sorted(by_pattern):
        group = by_pattern[k]
        failed = [j for j in group if j.failure]
        if failed:
            stats.failed_patterns += 1
            stats.failures[failed[0].failure] += 1
            continue
        share = sum(bool(j.correct) for j in group) / votes
        ok = share >= threshold
        patterns.append(MaskPattern(time_range=tuple(group[0].perturbation["time_range"]), oracle_correct=ok))
        stats.patterns += 1
        stats.oracle_correct += ok
    metadata = {k: v for k, v in sample.metadata.items() if k != "mask_candidates"}
    return sample.model_copy(update={"mask_patterns": patterns, "metadata": metadata})


# ---- resumable JSONL output --------------------------------------------------------------------
def done_ids(path: str | os.PathLike[str]) -> set[str]:
    """Ids already written to an output JSONL (a torn last line from a crash is ignored)."""
    path = Path(path)
    ids: set[str] = set()
    if not path.is_file():
        return ids
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            ids.add(str(json.loads(line)["id"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return ids


def open_output(path: str | os.PathLike[str], resume: bool, overwrite: bool) -> tuple[TextIO, set[str]]:
    """Open `path` for appending sample rows; with `resume` the ids already there are returned."""
    path = Path(path)
    if path.exists() and not (resume or overwrite):
        raise DataError(f"{path} exists: pass --resume to continue it or --overwrite to start again")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and resume:
        text = path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):  # drop a torn last line so appends stay valid JSONL
            path.write_text(text[: text.rfind("\n") + 1], encoding="utf-8")
        return path.open("a", encoding="utf-8"), done_ids(path)
    return path.open("w", encoding="utf-8"), set()


def row_writer(fh: TextIO, out_path: str | os.PathLike[str]) -> Callable[[VideoSample], None]:
    """A callback writing one sample per line, video paths relative to the output's folder."""
    base = Path(out_path).resolve().parent

    def write(sample: VideoSample) -> None:
        fh.write(json.dumps(sample.to_json_row(relative_to=base), ensure_ascii=False) + "\n")
        fh.flush()

    return write


def pending_samples(samples: Iterable[VideoSample], skip: set[str], limit: int | None = None) -> list[VideoSample]:
    todo = [s for s in samples if s.id not in skip]
    return todo[:limit] if limit is not None else todo


# ---- CLI ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="samples.jsonl with reference reasoning (Ref-Delta) traces")
    parser.add_argument("--out", required=True, help="annotated samples.jsonl (written sample by sample)")
    parser.add_argument("--policy", default="oracle", help="the oracle: hf:PATH | vllm:PATH | oracle | uniform | ... (default oracle)")
    parser.add_argument("--votes", type=int, default=1, help="masked episodes per candidate range (default 1, as VideoMend)")
    parser.add_argument("--threshold", type=float, default=0.5, help="share of correct votes for oracle_correct (default 0.5)")
    parser.add_argument("--max-patterns", type=int, default=None, help="at most this many candidate ranges per sample")
    parser.add_argument("--max-turns", type=int, default=None, help="env turn budget (default: EnvConfig's)")
    parser.add_argument("--max-pixels", type=int, default=None, help="per-frame pixel budget (default: EnvConfig's)")
    parser.add_argument("--batch-episodes", type=int, default=64, help="episodes advanced together (one policy call per turn)")
    parser.add_argument("--trajectories", default=None, help="also record every masked episode in this run directory")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run: samples already in --out are skipped")
    parser.add_argument("--overwrite", action="store_true", help="start --out again")
    parser.add_argument("--limit", type=int, default=None, help="annotate at most this many (more) samples")
    parser.add_argument("--seed", type=int, default=0, help="seed of the masked episodes and the policy's sampling (default 0)")
    parser.add_argument("--device", default="cpu", help="model policies: cpu or cuda")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="model policies: tokens per turn")
    parser.add_argument("--temperature", type=float, default=0.0, help="model policies: 0 = greedy, as an oracle should")


def run(args: argparse.Namespace) -> int:
    from videoseek.agents.policy import load_policy
    from videoseek.envs.trajectory import TrajectoryWriter
    from videoseek.envs.errors import UserError
    from videoseek.envs.env import EnvConfig

    if args.votes < 1:
        raise UserError(f"--votes must be at least 1, got {args.votes}")
    if not 0 < args.threshold <= 1:
        raise UserError(f"--threshold must be in (0, 1], got {args.threshold}")
    samples = VideoSample.from_jsonl(args.dataset)
    overrides = {k: v for k, v in (("max_turns", args.max_turns), ("max_pixels", args.max_pixels)) if v is not None}
    config = EnvConfig(**overrides)
    kwargs = {"device": args.device, "max_new_tokens": args.max_new_tokens, "temperature": args.temperature} if ":" in args.policy else {}
    try:
        policy = load_policy(args.policy, **kwargs)
    except (ValueError, OSError) as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    fh, already = open_output(args.out, args.resume, args.overwrite)
    todo = pending_samples(samples, already, args.limit)
    writer = TrajectoryWriter(args.trajectories) if args.trajectories else None
    try:
        stats = annotate_samples(
            todo, policy, env_config=config, votes=args.votes, threshold=args.threshold, max_patterns=args.max_patterns,
            batch_episodes=args.batch_episodes, seed=args.seed, on_sample=row_writer(fh, args.out), progress=True,
            trajectories=writer,
        )  # fmt: skip
    finally:
        fh.close()
    for failure, n in stats.failures.most_common():
        print(f"{n} pattern(s) failed: {failure}", file=sys.stderr)
    print(f"annotated {stats.samples} samples ({len(already)} already done): {stats.patterns} mask patterns, "
          f"{stats.oracle_correct} oracle-correct; {stats.without_candidates} samples without candidate ranges; "
          f"{stats.failed_patterns} patterns failed -> {args.out}")
    return 1 if stats.failed_patterns else 0

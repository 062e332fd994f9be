"""The group engine: how a sample's episodes are planned, seeded, perturbed and scored as one group.

Both episode drivers call it, so an episode gets the same id, seed, perturbation, reward and
advantage whichever plays it:

- the batched policy driver (`agents/rollout.py`: `run_rollouts`, which `videoseek rollout` and
  the local GRPO backend use);
- verl's async server driver (`training/verl_plugin/agent_loop.py`: `VideoSeekAgentLoop`).

A run is identified by (seed, step): the run's seed and the training step (0 outside training).
Every random choice of a group is drawn from it and the sample's id, never from a process-local
value (verl's prompt uid is a fresh uuid4 every step): DM-GRPO's mask pattern (VideoMend draws one
pattern per sample and step, seed 002 §5.3), each episode's env seed (T-GRPO's shuffle, the
policy's sampling stream). Probes and evaluations keep their masks by keeping the step fixed.

ProcessThinker's continuations (seed 004, eq. 2) are planned here too: where each step prefix
ends and when a continuation counts as a success; the drivers only sample them. So is the
look-on start (issue 37): a group whose episodes all begin with the same two crops that missed,
so that its G episodes differ only in what the policy decides next.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from videoseek.agents.policy import Message, stable_seed
from videoseek.agents.scripted import search_turn
from videoseek.envs.actions import Answer, parse_action
from videoseek.envs.sample import VideoSample
from videoseek.rewards import EpisodeSummary, RewardConfig, accuracy_reward, score_episode, score_group
from videoseek.rewards.process_thinker import parse_step_response
from videoseek.rewards.tags import iter_blocks

PERTURBATIONS = ("mask", "shuffle", "blend")

Scores = list[tuple[float, dict[str, float]]]


@dataclass(frozen=True)
class EpisodePlan:
    """One episode of a group: its id, the group it belongs to, its index there, its view and seed."""

    episode_id: str
    group_id: str
    index: int
    perturbation: dict[str, Any] | None
    seed: int
    look_on: str | None = None  # the kind of forced start it begins with (`look_on_start`); None: the policy plays every turn


def run_seed(seed: int, step: int, *parts: Any) -> int:
    """A seed drawn from the run (seed, step) and identities. Step 0 (evaluations, probes) keys on
    the seed alone, as releases before the step existed did, so their recorded runs replay."""
    return stable_seed(seed, *parts) if step == 0 else stable_seed(seed, step, *parts)


def episode_seed(seed: int, step: int, episode_id: str) -> int:
    """The env seed of one episode (its reset, T-GRPO's shuffle, the policy's sampling stream)."""
    return run_seed(seed, step, episode_id)


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of one turn of an episode seeded `seed`: verl's agent loop sends it to
    the server (vLLM's per-request `seed`), so a rerun samples the same turns where vLLM is
    deterministic; scripted test policies draw from it too."""
    return stable_seed(seed, turn)


def mask_perturbation(sample: VideoSample, seed: int, step: int) -> dict[str, Any]:
    """DM-GRPO's masked view: one of the sample's annotated mask patterns, drawn per sample and
    step as VideoMend's trainer draws it (seed 002 §5.3), from (run seed, step, sample id)."""
    if not sample.mask_patterns:
        raise ValueError(f"sample {sample.id}: no mask_patterns (annotate them with `videoseek annotate-masks`)")
    return {"kind": "mask", "pattern": run_seed(seed, step, sample.id) % len(sample.mask_patterns)}


def perturbation_of(kind: str, sample: VideoSample, seed: int, step: int) -> dict[str, Any] | None:
    """The perturbed view `kind` of a sample; None for a mask group of a sample without patterns
    (DM-GRPO's r_dm is then 0: the group is not played)."""
    if kind not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {kind!r}; choose from {PERTURBATIONS}")
    if kind == "mask":
        return mask_perturbation(sample, seed, step) if sample.mask_patterns else None
    return {"kind": kind}


def origin_plan(sample: VideoSample, index: int, seed: int, step: int = 0, look_on: str | None = None) -> EpisodePlan:
    """The `index`-th episode of the sample's origin group."""
    episode_id = f"{sample.id}/g{index}"
    return EpisodePlan(episode_id, sample.id, index, None, episode_seed(seed, step, episode_id), look_on)


def perturbed_plans(sample: VideoSample, kinds: Sequence[str], size: int, seed: int, step: int = 0) -> list[EpisodePlan]:
    """The `size` episodes of each perturbed group in `kinds` (groups the sample cannot have are left out)."""
    out = []
    for kind in kinds:
        pert = perturbation_of(kind, sample, seed, step)
        if pert is None:
            continue
        for g in range(size):
            episode_id = f"{sample.id}/{kind}/g{g}"
            out.append(EpisodePlan(episode_id, sample.id, g, pert, episode_seed(seed, step, episode_id)))
    return out


def plan_group(sample: VideoSample, group_size: int, kinds: Sequence[str], seed: int, step: int = 0,
               look_on_share: float = 0.0, look_on_starts: Sequence[str] = ("two_misses",)) -> list[EpisodePlan]:  # fmt: skip
    """The origin group and each perturbed group of one sample, G episodes each (G~ = G, as VideoMend).
    The origin group begins with a forced start with probability `look_on_share`, its kind drawn
    from `look_on_starts` (`look_on_kind`)."""
    look_on = look_on_kind(sample, seed, step, look_on_share, look_on_starts)
    origins = [origin_plan(sample, g, seed, step, look_on) for g in range(group_size)]
    return origins + perturbed_plans(sample, kinds, group_size, seed, step)


# ---- the look-on start (issue 37) ----------------------------------------------------------------
LOOK_ON_WINDOWS = 4  # the hasty teacher's quarter windows (agents.scripted.SweepPolicy)
LookOnStart = Literal["two_misses", "first_window"]  # the kinds of forced start (`look_on_start`)
LOOK_ON_STARTS: tuple[str, ...] = get_args(LookOnStart)


def look_on_start(sample: VideoSample, duration: float, kind: str = "two_misses", windows: int = LOOK_ON_WINDOWS) -> list[str]:
    """The forced first turns of an episode that begins with a forced start of `kind`, the searchers'
    crop turns (`agents.scripted.search_turn`) of some of `windows` equal windows of the video:

    - "two_misses", the look-on state: the first two windows that overlap no clue interval, two
      accepted crops that leave clue coverage at 0. The policy decides from the third turn on:
      look on, or answer without the evidence. Empty (the episode starts as any other) for a
      sample without clue intervals or without two clue-free windows.
    - "first_window", an exploring start (Sutton & Barto's Monte Carlo ES: episodes begin in states
      the policy itself rarely visits): the first window, whatever it holds. Where it shows the
      clue, answering is right; where it does not, looking on is: the group compares the two from
      one exact state, and only the frames tell the states apart.

    One definition for the two uses: `videoseek rollout --look-on-probe` starts every episode so
    (the look-on rate is then measured on every question, not only where the policy happened to
    miss twice), and GRPO's `--look-on-share` starts a share of its groups so, which makes their
    G episodes differ only from the decision on (GiGPO's anchor state, here exact: same video,
    same history).

    >>> from videoseek.envs.sample import VideoSample
    >>> s = VideoSample(id="a", video="v.mp4", question="q", options=["A. x", "B. y"], answer="A", clue_intervals=[(6.0, 7.0)])
    >>> [t.split("<tool_call>")[0].strip() for t in look_on_start(s, 10.0)]
    ['<think>The sparse frames do not show it.</think>', '<think>Not in that window.</think>']
    >>> look_on_start(s.model_copy(update={"clue_intervals": [(1.0, 2.0), (3.0, 6.0)]}), 10.0)
    []
    >>> [t.split("<tool_call>")[1] for t in look_on_start(s, 10.0, "first_window")]
    ['{"name": "crop_video", "arguments": {"start": 0.0, "end": 2.5}}</tool_call>']
    """
    spans = [(w * duration / windows, (w + 1) * duration / windows) for w in range(windows)]
    if kind == "first_window":
        return [search_turn(0, *spans[0]).text]
    if kind != "two_misses":
        raise ValueError(f"look_on_start: unknown kind {kind!r}; expected one of {', '.join(LOOK_ON_STARTS)}")
    clear = [(s, e) for s, e in spans if all(e <= cs or s >= ce for cs, ce in sample.clue_intervals)]
    if not sample.clue_intervals or len(clear) < 2:
        return []
    return [search_turn(k, *clear[k]).text for k in range(2)]


def starts_looking_on(sample: VideoSample, seed: int, step: int, share: float) -> bool:
    """Does this sample's origin group start in the look-on state at (seed, step)? Drawn from the
    run, the step and the sample id (both drivers draw the same); `share` 1 is every group, 0 none.

    >>> from videoseek.envs.sample import VideoSample
    >>> s = VideoSample(id="a", video="v.mp4", question="q", options=["A. x", "B. y"], answer="A")
    >>> starts_looking_on(s, 0, 3, 1.0), starts_looking_on(s, 0, 3, 0.0)
    (True, False)
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"look_on_share: {share} is not a share in [0, 1]")
    return share >= 1.0 or (share > 0.0 and run_seed(seed, step, sample.id, "look_on") % 1_000_000 < share * 1_000_000)


def look_on_kind(sample: VideoSample, seed: int, step: int, share: float, kinds: Sequence[str] = ("two_misses",)) -> str | None:
    """The kind of forced start this sample's origin group begins with at (seed, step), None for none.
    Whether it has one is `starts_looking_on`'s draw; which kind, a second draw from `kinds` (both
    drivers draw the same).

    >>> from videoseek.envs.sample import VideoSample
    >>> s = VideoSample(id="a", video="v.mp4", question="q", options=["A. x", "B. y"], answer="A")
    >>> look_on_kind(s, 0, 3, 1.0), look_on_kind(s, 0, 3, 0.0), look_on_kind(s, 0, 3, 1.0, ["first_window"])
    ('two_misses', None, 'first_window')
    """
    unknown = [k for k in kinds if k not in LOOK_ON_STARTS]
    if unknown or not kinds:
        raise ValueError(f"look_on_starts: {', '.join(map(repr, unknown)) or 'none given'}; expected some of {', '.join(LOOK_ON_STARTS)}")
    if not starts_looking_on(sample, seed, step, share):
        return None
    return kinds[run_seed(seed, step, sample.id, "look_on_kind") % len(kinds)]


def mask_of(plans: Sequence[EpisodePlan]) -> dict[str, Any] | None:
    """The mask perturbation a group was played with (DM-GRPO's reward reads its pattern)."""
    return next((p.perturbation for p in plans if p.perturbation and p.perturbation["kind"] == "mask"), None)


def score_origin_group(
    sample: VideoSample,
    origins: Sequence[EpisodeSummary],
    perturbed: Mapping[str, Sequence[EpisodeSummary]],
    config: RewardConfig,
    *,
    success_rates: Sequence[list[float] | None] | None = None,
    perturbation: Mapping[str, Any] | None = None,
) -> tuple[Scores, str | None]:
    """The origin episodes' (total, components) and the reason the group reward could not be formed.

    `score_group` first; when it cannot score the group (a DM-GRPO sample without mask patterns,
    every perturbed episode failed) each episode keeps its own score and the first line of the
    reason is returned, which both drivers record (`metrics["group_reward_error"]`, a warning).
    """
    try:
        scores = score_group(sample, list(origins), {k: list(v) for k, v in perturbed.items()}, config,
                             success_rates=list(success_rates) if success_rates is not None else None,
                             perturbation=dict(perturbation) if perturbation else None)  # fmt: skip
        return [(float(t), {k: float(v) for k, v in c.items()}) for t, c in scores], None
    except ValueError as exc:
        fallback = []
        for o, rates in zip(origins, success_rates or [None] * len(origins)):
            if rates is not None:  # the rollout process reward still reads the episode's own c_i
                o = dataclasses.replace(o, metadata={**o.metadata, "success_rates": rates})
            total, components = score_episode(sample, o, config)
            fallback.append((float(total), {k: float(v) for k, v in components.items()}))
        return fallback, str(exc).splitlines()[0]


# ---- turn-level credit (issue 37): the turn rewards both drivers place on a turn's tokens --------
def turn_rewards_of(turns: Sequence[Any], config: RewardConfig) -> list[float]:
    """Per assistant turn, CS-GRPO's step signal (seed 003: "step-wise credit when a later call
    improves the evidence state by more than 0.1"): 1 for an accepted call whose evidence gain
    exceeds `config.clue_seek.gain_threshold`, else 0. `turns` are a `Trajectory`'s turns; the
    unit value is enough, `rewards.advantage.turn_advantages` normalises it within the group.
    Forced turns (the look-on start's) are not the policy's and carry no tokens to train: left out.
    With `config.clue_seek.turn_penalty` > 0 (off by default), a turn that repeats an earlier call or
    whose call the env refused (`Turn.refused`) gets minus that instead of 0.

    >>> from types import SimpleNamespace as T
    >>> turn_rewards_of([T(call=T(gain=0.3)), T(call=T(gain=0.05)), T(call=None)], RewardConfig())
    [1.0, 0.0, 0.0]
    >>> turn_rewards_of([T(call=T(gain=0.0), forced=True), T(call=T(gain=0.3), forced=False)], RewardConfig())
    [1.0]
    >>> miss, again = T(call=T(gain=0.0, duplicate_of=None), refused=False), T(call=T(gain=0.0, duplicate_of=0), refused=False)
    >>> turn_rewards_of([miss, again, T(call=None, refused=True)], RewardConfig(clue_seek={"turn_penalty": 1.0}))
    [0.0, -1.0, -1.0]
    """
    threshold, penalty = config.clue_seek.gain_threshold, config.clue_seek.turn_penalty
    rewards = []
    for t in turns:
        if getattr(t, "forced", False):
            continue
        if t.call is not None and float(t.call.gain or 0.0) > threshold:
            rewards.append(1.0)
        elif penalty and (t.refused or getattr(t.call, "duplicate_of", None) is not None):
            rewards.append(-penalty)
        else:
            rewards.append(0.0)
    return rewards


def episode_env_config(config: Any, seed: int, initial_frames: Sequence[int] = ()) -> Any:
    """Frame-budget gating (ParaVT, as issue 37 cites it: "the number of initial frames is drawn per
    episode, for example from {2, 4, 8, 16}, so that calling the tool earns credit"): the env config of
    one episode, its `initial_frames` drawn from `initial_frames` by the episode's seed (so both
    drivers draw the same number for the same episode); `config` itself when no choices are given.

    >>> from videoseek.envs.env import EnvConfig
    >>> episode_env_config(EnvConfig(), 7, [2, 4, 8, 16]).initial_frames in (2, 4, 8, 16)
    True
    >>> episode_env_config(EnvConfig(), 7).initial_frames
    8
    """
    if not initial_frames:
        return config
    return config.model_copy(update={"initial_frames": int(initial_frames[stable_seed(seed, "initial_frames") % len(initial_frames)])})


# ---- ProcessThinker continuations (seed 004, eq. 2) ---------------------------------------------
_STEP_END = re.compile(r"</step>")


def step_cut_points(messages: Sequence[Message], count: int) -> list[tuple[int, int]]:
    """(message index, character offset just after `</step>`) of the first `count` steps, in order.

    Steps are counted inside the `<think>` blocks of assistant turns, as ProcessThinker's parser does.
    """
    cuts = [(k, think.content_start + m.end()) for k, msg in enumerate(messages) if msg.role == "assistant"
            for think in iter_blocks(msg.text, "think")
            for m in _STEP_END.finditer(think.content)]  # fmt: skip
    return cuts[:count]


def continuation_prefixes(messages: Sequence[Message], config: RewardConfig) -> list[tuple[int, str]]:
    """Where ProcessThinker samples continuations of one finished episode: per step prefix p_i
    (i <= K_max), (index of the assistant message it lies in, that message's text up to just after
    the i-th `</step>`). Empty when the response is not format-valid or K is outside
    [K_min, K_max]: the seed samples no continuation then (r = 0)."""
    p = config.process_thinker
    nested, steps = parse_step_response([m.text for m in messages if m.role == "assistant"])
    if not nested or not (p.k_min <= len(steps) <= p.k_max):
        return []
    return [(k, messages[k].text[:offset]) for k, offset in step_cut_points(messages, min(len(steps), p.k_max))]


def continuation_succeeds(sample: VideoSample, text: str, threshold: float) -> bool:
    """Does a step prefix plus its continuation end in a correct answer (ProcessThinker's verifier)?

    A continuation is one assistant turn sampled after the prefix, with the frames seen up to
    there; one that calls the tool instead of answering fails (our choice: the seed is
    single-turn, and replaying tool calls would multiply the cost)."""
    action = parse_action(text).action
    return isinstance(action, Answer) and accuracy_reward(action.text, sample) >= threshold


def continuation_id(episode_id: str, prefix: int, m: int) -> str:
    """The id of the m-th continuation of prefix i (1-based), which seeds its sampling."""
    return f"{episode_id}/prefix{prefix}/m{m}"

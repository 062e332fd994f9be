"""Batched rollouts: N samples × G episodes (+ perturbed groups) driven turn by turn.

All live episodes advance together: one `policy.act` call per turn for the whole batch, so a
model policy generates for every episode at once, and the G episodes of one sample share decoded
frames through the frame cache. A crash inside one episode (env or policy) is recorded in that
episode's trajectory (`failure`) and never stops the run. With an output directory the run is
resumable: samples whose episodes are all in `trajectories.jsonl` are skipped.

This is the batched driver of the episode engine: what a group is (its episodes, seeds,
perturbations, scoring) is `agents/groups.py`'s, shared with verl's `VideoSeekAgentLoop`; the
record it writes is `envs/trajectory.py`'s; policies come from `agents.policy.load_policy`.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from videoseek.agents.policy import Message, Policy, PolicyInput, PolicyOutput, stable_seed
from videoseek.agents.prompting import assistant_message, initial_messages, tool_message
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory, TrajectoryWriter
from videoseek.envs.actions import Invalid, sanitize_text
from videoseek.agents.groups import (
    continuation_id,
    continuation_prefixes,
    continuation_succeeds,
    episode_env_config,
    episode_seed,
    look_on_start,
    mask_of,
    plan_group,
    score_origin_group,
)
from videoseek.rewards import group_advantages


# ---- episodes ---------------------------------------------------------------------------------
@dataclass
class Episode:
    sample: VideoSample
    episode_id: str
    group_id: str
    index: int
    perturbation: dict[str, Any] | None
    env: VideoSeekEnv | None = None
    messages: list[Message] = field(default_factory=list)
    rng: np.random.Generator | None = None
    done: bool = False
    failure: str | None = None
    pattern: int | None = None  # which candidate mask pattern (mask annotation)
    seed: int | None = None  # the env seed (`agents.groups.episode_seed`); None: derived from the run seed
    correct: bool | None = None  # filled by callers that need the outcome after the env is released
    tools: list[dict[str, Any]] | None = None  # the env's tool schemas (info["tools"]), which model policies render
    env_config: EnvConfig | None = None  # this episode's own env config (frame-budget gating); None: the run's
    look_on: str | None = None  # the kind of forced start it begins with (`agents.groups.look_on_start`); None: none
    forced: list[str] = field(default_factory=list)  # the start's turns still to play, in order


def plan_episodes(samples: Sequence[VideoSample], group_size: int, perturbations: Sequence[str], seed: int, step: int = 0,
                  look_on_share: float = 0.0, look_on_starts: Sequence[str] = ("two_misses",)) -> list[Episode]:  # fmt: skip
    """The origin group and each perturbed group for every sample (`agents.groups.plan_group`)."""
    return [Episode(s, p.episode_id, p.group_id, p.index, p.perturbation, seed=p.seed, look_on=p.look_on)
            for s in samples for p in plan_group(s, group_size, perturbations, seed, step, look_on_share, look_on_starts)]  # fmt: skip


def _start(ep: Episode, config: EnvConfig, policy_name: str, seed: int) -> None:
    # share_frames: the G episodes of a sample hold one read-only copy of the frames they all see.
    ep.env = VideoSeekEnv(ep.sample, ep.env_config or config, share_frames=True)
    ep_seed = ep.seed if ep.seed is not None else episode_seed(seed, 0, ep.episode_id)
    ep.rng = np.random.default_rng(ep_seed)
    obs, info = ep.env.reset(
        seed=ep_seed,
        options={
            "perturbation": ep.perturbation,
            "episode_id": ep.episode_id,
            "policy": policy_name,
            "group": {"id": ep.group_id, "index": ep.index},
        },
    )
    ep.messages = initial_messages(obs, info["instructions"])  # NO_TOOL_SYSTEM_PROMPT with EnvConfig(tools=[])
    ep.tools = info["tools"]
    ep.forced = look_on_start(ep.sample, ep.env.evidence.duration, ep.look_on) if ep.look_on else []


def _record_failure(ep: Episode, where: str, exc: BaseException) -> None:
    ep.done = True
    ep.failure = sanitize_text(f"{where}: {type(exc).__name__}: {exc}".splitlines()[0][:500])[0]
    ep.failure_trace = traceback.format_exc(limit=5)  # type: ignore[attr-defined]


def drive_episodes(
    episodes: Iterable[Episode],
    policy: Policy,
    config: EnvConfig,
    *,
    seed: int = 0,
    batch_episodes: int = 64,
    on_done: Callable[[Episode], None] | None = None,
) -> None:
    """Advance `episodes` together, one batched `policy.act` per turn over every live episode.

    At most `batch_episodes` run at once, taken from `episodes` in order as others end (an
    iterator is consumed only as far as needed, so episodes can be planned lazily); `on_done(ep)`
    is called as each one ends (its env, trajectory and frames still attached). Failures (reset,
    policy, step) end only their episode, recorded in `ep.failure`.
    """
    queue = iter(episodes)
    live: list[Episode] = []
    exhausted = False
    while not exhausted or live:
        while not exhausted and len(live) < batch_episodes:
            ep = next(queue, None)
            if ep is None:
                exhausted = True
                break
            try:
                _start(ep, config, policy.name, seed)
            except Exception as exc:
                _record_failure(ep, "reset", exc)
            live.append(ep)
        for ep in live:  # the episode's start plays its forced turns; the policy is not asked
            if not ep.done and ep.forced:
                _advance(ep, PolicyOutput(text=ep.forced.pop(0)), forced=True)
        active = [ep for ep in live if not ep.done and not ep.forced]
        if active:
            inputs = [
                PolicyInput(ep.sample, ep.messages, ep.env.evidence, len(ep.env.trajectory.turns), ep.episode_id, ep.rng, tools=ep.tools)
                for ep in active
            ]
            for ep, out in zip(active, _act(policy, active, inputs)):
                if out is not None:
                    _advance(ep, out)
        for ep in live:
            if ep.done and on_done is not None:
                on_done(ep)
        live = [ep for ep in live if not ep.done]


def run_rollouts(
    samples: Sequence[VideoSample],
    policy: Policy,
    *,
    group_size: int = 1,
    perturbations: Sequence[str] = (),
    env_config: EnvConfig | None = None,
    out_dir: str | Path | None = None,
    seed: int = 0,
    step: int = 0,
    batch_episodes: int = 64,
    progress: bool = True,
    on_episode: Callable[[Trajectory], None] | None = None,
    keep: bool = True,
    norm_by_std: bool = True,
    initial_frames: Sequence[int] = (),
    look_on_share: float = 0.0,
    look_on_starts: Sequence[str] = ("two_misses",),
) -> list[Trajectory]:
    """Run every planned episode and return the finished trajectories (origin and perturbed).

    Group rewards and GRPO advantages (`agents.groups`) are applied per sample once all of its
    episodes have finished; they replace `reward` on the origin episodes. `seed` and `step` (the
    training step, 0 outside training) decide every episode's seed and DM-GRPO's mask pattern.
    `norm_by_std` is verl's `algorithm.norm_adv_by_std_in_grpo` (False: Dr. GRPO's r - mean).
    `initial_frames`: frame-budget gating, each episode's initial frames drawn from these
    (`agents.groups.episode_env_config`); empty: the env config's. `look_on_share`: the share of
    origin groups that start in the look-on state (`agents.groups.look_on_start`; 1: every
    episode, `videoseek rollout --look-on-probe`), their forced turns played before the policy's;
    `look_on_starts`: the kinds of start such a group draws from (`agents.groups.LOOK_ON_STARTS`).

    Memory holds only the live batch: episodes are planned a sample at a time as the batch has
    room, and a finished group's frames, conversation and env are released once it is written.
    With `keep=False` nothing else grows with the run either: the trajectories go only to
    `out_dir` and `on_episode`, and the returned list is empty (`videoseek rollout` runs so).
    """
    config = env_config or EnvConfig()
    # The reward preset may need perturbed groups (dmgrpo: mask, tgrpo: shuffle): run them.
    perturbations = list(dict.fromkeys([*perturbations, *config.reward.group_kinds()]))
    writer = TrajectoryWriter(out_dir) if out_dir is not None else None
    done_ids = writer.finished_episodes() if writer else set()

    def groups() -> Iterable[list[Episode]]:
        # Resume per sample: a group is rescored as a whole, so rerun it unless all of it is written.
        for s in samples:
            eps = plan_episodes([s], group_size, perturbations, seed, step, look_on_share, look_on_starts)
            for e in eps if initial_frames else ():
                e.env_config = episode_env_config(config, e.seed, initial_frames)
            if eps and not all(e.episode_id in done_ids for e in eps):
                yield eps

    seen_ids: set[str] = set()
    for s in samples:  # a sample's id names its group: two samples under one id would share it
        if s.id in seen_ids:
            raise ValueError(f"run_rollouts: duplicate sample id {s.id!r} (each sample's episodes form one group)")
        seen_ids.add(s.id)
    todo_ids = {e.episode_id for eps in groups() for e in eps}  # ids only: the Episodes are planned again lazily
    if writer:
        writer.drop(todo_ids)
    results: list[Trajectory] = []
    pending: dict[str, list[Episode]] = {}

    def planned() -> Iterable[Episode]:
        for eps in groups():
            pending[eps[0].group_id] = eps
            yield from eps

    bar = _progress(len(todo_ids), enabled=progress)
    t0 = time.perf_counter()
    finished_count = 0

    def finished(ep: Episode) -> None:
        nonlocal finished_count
        finished_count += 1
        bar.update(1, rate=finished_count / max(time.perf_counter() - t0, 1e-9))
        group = pending.get(ep.group_id)  # None once a sibling finishing at the same turn closed it
        if group is not None and all(e.done for e in group):
            rates = None
            if config.reward.needs_continuations():
                origin = [e for e in group if e.perturbation is None]
                rates = dict(zip((e.episode_id for e in origin), sample_success_rates(policy, origin, config)))
            trajs = _finish_group(group, config, policy.name, rates, norm_by_std)
            for traj, e in zip(trajs, group):
                if writer:
                    writer.write(traj, e.env.frames_by_turn if e.env else {})
                if on_episode:
                    on_episode(traj)
            if keep:
                results.extend(trajs)
            for e in group:
                # Release the frames (env cache and conversation) so memory does not grow with the
                # run. A new list, not clear(): a caller holding the conversation (training's
                # RecordingPolicy) keeps it.
                e.env, e.rng = None, None
                e.messages = []
            del pending[ep.group_id]

    drive_episodes(planned(), policy, config, seed=seed, batch_episodes=batch_episodes, on_done=finished)
    bar.close()
    return results


def _act(policy: Policy, active: list[Episode], inputs: list[PolicyInput], record: bool = True) -> list[PolicyOutput | None]:
    """One batched policy call; if it fails, each input is retried alone so that only the
    episodes whose input breaks the policy are failed (and recorded if `record`), never the run."""
    try:
        outputs = policy.act(inputs)
        if len(outputs) != len(inputs):
            raise RuntimeError(f"policy returned {len(outputs)} outputs for {len(inputs)} inputs")
        return list(outputs)
    except Exception as exc:
        if len(inputs) == 1:
            if record:
                _record_failure(active[0], "policy", exc)
            return [None]
    return [out for ep, inp in zip(active, inputs) for out in _act(policy, [ep], [inp], record)]


def _advance(ep: Episode, out: PolicyOutput, forced: bool = False) -> None:
    try:
        text = out.text if isinstance(out, PolicyOutput) else str(out)
        # Unencodable text (lone surrogates from a broken decode) is replaced on entry, so the next
        # prompt and the trajectory can be encoded; the env records the count (info, metrics, repairs).
        clean = sanitize_text(text)[0] if isinstance(text, str) else text
        ep.messages.append(assistant_message(clean, out.token_ids if isinstance(out, PolicyOutput) else None, forced=forced))
        invalid = getattr(out, "invalid", None)  # a served model's reply without a usable turn
        obs, _, terminated, truncated, info = ep.env.step(Invalid(invalid) if invalid else text)
        turn = ep.env.trajectory.turns[-1]
        turn.forced = forced
        if getattr(out, "usage", None):
            turn.tokens = dict(out.usage)
        elif out.token_ids is not None:
            turn.tokens = {"prompt": len(out.prompt_token_ids or []), "completion": len(out.token_ids)}
        if terminated or truncated:
            ep.done = True
        else:
            ep.messages.append(tool_message(obs))
    except Exception as exc:
        _record_failure(ep, "step", exc)


def _trajectory_of(ep: Episode, policy_name: str) -> Trajectory:
    if ep.env is not None and ep.env.trajectory is not None:
        traj = ep.env.trajectory
    else:  # the episode failed before reset produced a record
        s = ep.sample
        traj = Trajectory(
            episode_id=ep.episode_id, sample_id=s.id, policy=policy_name,
            group={"id": ep.group_id, "index": ep.index, "role": "perturbed" if ep.perturbation else "origin", "perturbation": ep.perturbation},
            question=s.question, options=s.options, answer=s.answer, problem_type=s.problem_type.value,
            duration=s.duration or 0.0, clue_intervals=s.clue_intervals, video=s.video, initial={"text": ""},
        )  # fmt: skip
    if ep.failure:
        traj.failure = ep.failure
    return traj


def _finish_group(group: list[Episode], config: EnvConfig, policy_name: str, rates: dict[str, list[float] | None] | None = None,
                  norm_by_std: bool = True) -> list[Trajectory]:
    trajs = [_trajectory_of(ep, policy_name) for ep in group]
    origin = [(t, ep) for t, ep in zip(trajs, group) if ep.perturbation is None]
    perturbed: dict[str, list[Any]] = {}
    for t, ep in zip(trajs, group):
        if ep.perturbation is not None and ep.env is not None and ep.env.trajectory is not None and not ep.failure:
            perturbed.setdefault(ep.perturbation["kind"], []).append(ep.env.summary())
    ok = [(t, ep) for t, ep in origin if ep.env is not None and ep.env.trajectory is not None and not ep.failure]
    if ok:
        success = [rates.get(ep.episode_id) for _, ep in ok] if rates else None
        for (t, _), r in zip(ok, success or []):
            if r is not None:
                t.metrics["success_rates"] = r
        final, error = score_origin_group(group[0].sample, [ep.env.summary() for _, ep in ok], perturbed, config.reward,
                                          success_rates=success, perturbation=mask_of(group))  # fmt: skip
        for (t, _), (total, components) in zip(ok, final):
            t.reward, t.reward_components = total, components
            if error is not None:
                t.metrics["group_reward_error"] = error
        for (t, _), a in zip(ok, group_advantages([t.reward for t, _ in ok], norm_by_std=norm_by_std)):
            t.advantage = float(a)
    return trajs


def step_prefix_inputs(ep: Episode, config: EnvConfig) -> list[tuple[int, PolicyInput]]:
    """ProcessThinker continuation requests of one finished episode: (prefix index, input) pairs.

    Prefix i ends right after the i-th `</step>` of the episode's thinking
    (`agents.groups.continuation_prefixes`); the policy is given the conversation up to that
    assistant turn and the turn's text up to there (`prefix`), M times with distinct episode ids
    (so model policies sample distinct continuations).
    """
    out = []
    for i, (k, prefix) in enumerate(continuation_prefixes(ep.messages, config.reward)):
        turn = sum(1 for m in ep.messages[:k] if m.role == "assistant")
        for m in range(config.reward.process_thinker.num_continuations):
            eid = continuation_id(ep.episode_id, i + 1, m)
            inp = PolicyInput(ep.sample, ep.messages[:k], ep.env.evidence, turn, eid, np.random.default_rng(stable_seed(eid)), prefix=prefix, tools=ep.tools)
            out.append((i, inp))
    return out


def sample_success_rates(policy: Policy, episodes: Sequence[Episode], config: EnvConfig) -> list[list[float] | None]:
    """c_i of each episode's step prefixes (ProcessThinker eq. 2), from one batched policy call
    (success: `agents.groups.continuation_succeeds`). None for episodes that are not sampled
    (format-invalid, K outside [K_min, K_max], or failed)."""
    requests = [(e, i, inp) for e, ep in enumerate(episodes) if ep.env is not None and not ep.failure
                for i, inp in step_prefix_inputs(ep, config)]  # fmt: skip
    rates: list[list[float] | None] = [None] * len(episodes)
    if not requests:
        return rates
    outputs = _act(policy, [episodes[e] for e, _, _ in requests], [inp for _, _, inp in requests], record=False)
    wins: dict[tuple[int, int], list[float]] = {}
    for (e, i, inp), out in zip(requests, outputs):
        ok = out is not None and continuation_succeeds(episodes[e].sample, inp.prefix + out.text, config.reward.correct_threshold)
        wins.setdefault((e, i), []).append(float(ok))
    for (e, i), flags in sorted(wins.items()):
        rates[e] = (rates[e] or []) + [sum(flags) / len(flags)]
    return rates


class _progress:
    """A rich progress bar with episodes/s (a no-op when disabled)."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self._p = None
        if enabled and total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._p = Progress(TextColumn("rollout"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]:.1f} ep/s"), TimeElapsedColumn(), transient=False)
            self._p.start()
            self._task = self._p.add_task("rollout", total=total, rate=0.0)

    def update(self, n: int, rate: float) -> None:
        if self._p is not None:
            self._p.update(self._task, advance=n, rate=rate)

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()

"""`VideoSeekAgentLoop`: verl's multi-turn agent loop driving `VideoSeekEnv` (registered as "videoseek").

verl (0.9.x) runs one `AgentLoopBase.run` coroutine per trajectory inside its agent-loop workers;
the loop talks to the rollout servers (vLLM) through `server_manager.generate` with token ids in
and token ids out. This loop:

1. builds a `VideoSeekEnv` from the row's sample (`extra_info["sample"]`, written by
   `videoseek export-verl`) and resets it;
2. renders the conversation with the shared `ConversationRenderer` (Qwen's chat template with the
   env's tool schemas, `EnvConfig.tools`; the frames as a Qwen-VL *video* with their real
   timestamps) - the renderer the transformers policy uses, so a conversation has the same token
   ids in verl as in a local rollout. These
   ids (each video expanded by the processor) are what training sees; the server gets the same
   conversation with one placeholder per video (`families.vllm_prompt_ids`), which vLLM expands
   back to exactly these ids (for Qwen3-VL, sending the expanded ids made vLLM write every frame
   pair's `<t seconds>` and markers a second time);
3. loops: generate a turn (stop at `<|im_end|>` or the protocol's stop strings, capped by the
   response budget) -> `env.step(text)` (the env parses the call and runs whichever of its tools
   it names) -> append the tool turn (its text and the frames the call returned as a new video: a
   crop's frames, a zoom's one frame, any tool's, as the renderer lays out every tool turn) with
   response_mask 0 -> until the env ends the episode or the response budget
   (`rollout.response_length`) is spent. verl's stock `ToolAgentLoop` rejects tools that return
   video (`NotImplementedError`), hence this loop (`tool_adapter.py` serves that loop instead,
   frames as images);
4. returns `AgentLoopOutput` with the prompt / response ids, response_mask (1 exactly on the
   tokens the model generated), the frames of every video in placeholder order as
   `multi_modal_data["videos"]` (verl recomputes `pixel_values_videos` / `video_grid_thw` and the
   M-RoPE position ids from them, with the processor `positions.align_positions` fixed),
   `num_turns`, and `extra_fields`: the server outputs' own fields merged as verl's
   `ToolAgentLoop` merges them (`min_global_steps` / `max_global_steps`, which verl's v1 trainer
   reads as ints) plus `extra_fields["videoseek"]`: the episode summary, the retrieved spans, the
   accepted calls per tool, the env's tool names, evidence state, reward preset and, for group
   presets, the group reward (`records.py` documents the layout; `reward_fn.compute_score` reads it).

With verl's v1 trainer and `trainer.rollout_data_dir` set, each episode is also written to
`rollout_data_dir/videoseek/` (`episode_dump.py`) as the env's own `Trajectory`, perturbed
episodes included: verl's v1 dump keeps the text only.

What an episode is (its id, index, seeds, perturbation, group score, ProcessThinker prefixes)
comes from `agents.groups`, the engine `run_rollouts` uses too: this loop is the async driver.
Group rewards (DM-GRPO, T-GRPO): the loop also runs the perturbed group itself, once per group,
through the same server manager, and returns only origin trajectories (`group.py` explains why).

Nothing a policy writes can raise here: the env parses any text, and a turn with vision markup is
cut and played as an invalid turn. A failure of the server (`generate` raises) or of the
environment (a video that stops decoding mid-episode) ends the episode with every response token
masked 0 and `failure` recorded, so the trainer keeps going and the `videoseek_grpo` estimator
leaves the row out of its group. A response is never empty (verl puts the reward on its last
token). Bad data (an unreadable sample or video at reset) raises, naming the sample: verl's v1
trainer marks the prompt failed and, with `sync_refill_failed_groups` (set by `verl_overrides`),
replaces it (docs/training.md, "Failures").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from videoseek.agents.families import vllm_prompt_ids
from videoseek.agents.groups import (
    episode_env_config,
    turn_rewards_of,
    EpisodePlan,
    LookOnStart,
    continuation_id,
    continuation_prefixes,
    continuation_succeeds,
    episode_seed,
    look_on_kind,
    look_on_start,
    mask_of,
    origin_plan,
    perturbed_plans,
    score_origin_group,
    turn_seed,
)
from videoseek.agents.policy import Message, stable_seed
from videoseek.agents.prompting import (
    DEFAULT_STOP_STRINGS,
    ConversationRenderer,
    TemplateError,
    assistant_message,
    initial_messages,
    prefix_token_ids,
    schemas_of,
    tool_message,
)
from videoseek.envs.actions import Invalid
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory
from videoseek.rewards import EpisodeSummary, RewardConfig
from videoseek.training.verl_plugin.episode_dump import dump_key, episode_dump
from videoseek.envs.metrics import facts_of_trajectory
from videoseek.training.verl_plugin.group import GroupCoordinator, StepToolUse
from videoseek.training.verl_plugin.positions import align_positions
from videoseek.training.verl_plugin.records import (
    AGENT_NAME,
    EXTRA_KEY,
    episode_view,
    loop_call_fields,
    sample_from_extra_info,
    summary_to_dict,
)

logger = logging.getLogger(__name__)


class GenerationError(RuntimeError):
    """The rollout server failed to produce a turn (the episode ends as a failure)."""


class LoopOptions(BaseModel):
    """Options of `VideoSeekAgentLoop`, given under `videoseek:` in the agent-loop YAML."""

    model_config = ConfigDict(extra="forbid")

    reward: RewardConfig = Field(default_factory=lambda: RewardConfig(preset="csgrpo"))
    env: EnvConfig = Field(default_factory=EnvConfig)
    max_turn_tokens: int = Field(default=512, ge=1, description="generation cap of one assistant turn")
    stop: list[str] = Field(default_factory=lambda: list(DEFAULT_STOP_STRINGS), description="strings that end a turn")
    perturbed_group_size: int | None = Field(default=None, ge=1, description="G~ of each perturbed group; None: the origin group's size")
    seed: int = Field(default=0, description="the run's seed: with the training step it decides episode seeds and mask patterns (agents.groups)")
    min_pixels: int | None = None
    max_pixels: int | None = None
    turn_rewards: bool = Field(default=False, description="place each turn's reward on its first token (the videoseek_turn_grpo estimator reads them)")
    over_turn_mask: bool = Field(default=False, description="Mini-o3's over-turn masking: an episode cut by a budget contributes no loss")
    initial_frames: list[int] = Field(default_factory=list, description="frame-budget gating: each episode's initial frames drawn from these (agents.groups.episode_env_config)")
    look_on_share: float = Field(default=0.0, ge=0.0, le=1.0, description="the share of groups that start in the look-on state (agents.groups.look_on_start)")
    look_on_starts: list[LookOnStart] = Field(default_factory=lambda: ["two_misses"], min_length=1,
                                              description="the kinds of forced start such a group draws from (agents.groups.look_on_start)")  # fmt: skip


@dataclass
class EpisodeResult:
    """One finished episode in token form, plus what scoring needs."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None  # None when the server sent none for some turn: verl recomputes
    videos: list[Any]
    messages: list[Message]
    summary: EpisodeSummary
    evidence: dict[str, float]
    turns: int
    tool_turns: int
    ended_by: str  # "env" (answer or turn limit), "budget" (response length), "vision_token", "failure"
    failure: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    server_fields: dict[str, Any] = field(default_factory=dict)  # the server outputs' extra_fields, merged
    trajectory: Trajectory | None = None  # the env's own record of the episode (what every path writes)


class TurnRewardOutput(AgentLoopOutput):
    """An episode whose turn rewards (`extra_fields["videoseek"]["turn_rewards"]`) verl's
    `rm_scores` carries on each turn's first token, beside the episode reward verl puts on the
    last token: the layout `videoseek_turn_grpo` reads (`estimators.place_turn_rewards`)."""

    def as_dict(self) -> dict[str, Any]:
        from videoseek.training.verl_plugin.estimators import place_turn_rewards

        out = super().as_dict()
        rewards = (out.get("extra_fields", {}).get(EXTRA_KEY) or {}).get("turn_rewards")
        if rewards and "rm_scores" in out:
            place_turn_rewards(out["rm_scores"], out["response_mask"], rewards)
        return out


# Per-turn counters verl's servers report in `extra_fields` and verl's ToolAgentLoop sums over turns.
SUMMED_SERVER_FIELDS = ("spec_num_draft_tokens", "spec_num_accepted_tokens", "spec_num_verify_steps")


def merge_server_fields(merged: dict[str, Any], new: Mapping[str, Any]) -> None:
    """Fold one turn's `TokenOutput.extra_fields` into the episode's, as verl's `ToolAgentLoop` does
    (tool_agent_loop.py ~261-270): the first turn's fields, then the latest weights version
    (`max_global_steps`, the larger of the two) and summed speculative-decoding counters.

    verl's v1 worker copies `min_global_steps` / `max_global_steps` into each trajectory's tags and
    the trainer reads them as ints (off-policy staleness metrics), so they must survive the loop.
    """
    if not merged:
        merged.update(new)
        return
    latest = new.get("max_global_steps")
    if latest is not None:
        current = merged.get("max_global_steps")
        merged["max_global_steps"] = latest if current is None else max(current, latest)
    for key in SUMMED_SERVER_FIELDS:
        if key in new and key in merged:
            merged[key] = int(merged[key]) + int(new[key])


_RENDERERS: dict[tuple, ConversationRenderer] = {}


def shared_renderer(processor: Any, min_pixels: int | None, max_pixels: int | None, tools: Any = True) -> ConversationRenderer:
    """One renderer per processor, pixel bounds and tool list (verl builds an agent loop per trajectory).

    `tools`: the env's tool schemas (`info["tools"]`), or what `prompting.schemas_of` reads (tool
    names as in `EnvConfig.tools`, True for the default tools); [] (the no-tool baseline) renders
    no schema, as the transformers policy does: the model is not told of a tool the env refuses."""
    schemas = schemas_of(tools)
    key = (id(processor), min_pixels, max_pixels, json.dumps(schemas, sort_keys=True))
    renderer = _RENDERERS.get(key)
    if renderer is None:
        renderer = ConversationRenderer(processor, mode="video", min_pixels=min_pixels, max_pixels=max_pixels, tools=schemas)
        _RENDERERS[key] = renderer
    return renderer


@register(AGENT_NAME)
class VideoSeekAgentLoop(AgentLoopBase):
    """A VideoSeek episode (and, for group presets, its group's perturbed episodes) per trajectory."""

    groups = GroupCoordinator()  # one per worker process: the sessions of a uid meet here
    step_tool_use: StepToolUse | None = None  # one per worker process, made on first use (`tool_use`)

    def tool_use(self) -> StepToolUse:
        """This worker's per-step tool-use aggregate (`group.StepToolUse`), written beside the episode dump when there is one."""
        if type(self).step_tool_use is None:
            import os

            sink = self.episode_dump.folder.parent / f"videoseek_tool_use.{os.getpid()}.jsonl" if self.episode_dump is not None else None
            type(self).step_tool_use = StepToolUse([s["function"]["name"] for s in self.tool_schemas], sink=sink, log=logger)
        return type(self).step_tool_use

    def __init__(self, *args: Any, videoseek: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # verl passes its ToolAgentLoop tool list; this loop's tools are the env's (EnvConfig.tools)
        kwargs.pop("name", None)  # the YAML entry's `name` reaches us as a kwarg through hydra
        super().__init__(*args, **kwargs)
        self.options = self.check_options(videoseek or {})
        # The env scores its terminal step with the loop's reward config, so its trajectory agrees.
        self.env_config = self.options.env.model_copy(update={"reward": self.options.reward})
        if self.processor is None:
            raise ValueError("VideoSeekAgentLoop needs a vision-language model with a processor (Qwen2.5-VL / Qwen3-VL)")
        # The schemas the env gives at reset (`info["tools"]`), from the same EnvConfig.tools.
        self.tool_schemas = schemas_of(self.env_config.tools)
        self.renderer = shared_renderer(self.processor, self.options.min_pixels, self.options.max_pixels, self.tool_schemas)
        # verl computes the trajectory's M-RoPE positions with this (the worker's) processor: make
        # them the ones vLLM samples with, real clip rates included (positions.py).
        align_positions(self.processor)
        # Frames reach vLLM raw: resize them there exactly as the training processor does.
        self.mm_processor_kwargs = dict(self.renderer.vision_kwargs) or None
        self.end_of_turn_id = self.renderer.end_of_turn_id
        # Vision markup the policy must not write: each needs frames the conversation does not have,
        # and verl's post-processing would fail to align features. A turn is cut before such a token.
        self.forbidden_ids = {self.renderer.image_token_id, self.renderer.video_token_id} | {
            int(i) for i in self.tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"]) if i is not None
        }
        self.episode_dump = episode_dump(self.config)
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length

    @staticmethod
    def check_options(options: Mapping[str, Any]) -> LoopOptions:
        """Validate the YAML options (ValueError naming the field); also used by `--dry-run`."""
        try:
            from omegaconf import DictConfig, OmegaConf

            if isinstance(options, DictConfig):
                options = OmegaConf.to_container(options, resolve=True)
        except ImportError:  # pragma: no cover - omegaconf ships with verl
            pass
        return LoopOptions.model_validate(dict(options))

    # ---- verl entry point --------------------------------------------------------------------
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        sample = sample_from_extra_info(kwargs.get("extra_info"))
        uid = str(kwargs.get("uid") if kwargs.get("uid") is not None else f"{sample.id}#{kwargs.get('index', '')}")
        session = kwargs.get("session_id", uuid4().hex)
        step = kwargs.get("global_steps")
        step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) and step >= 0 else 0
        config = self.options.reward
        kinds = config.group_kinds()
        # Join before the first await: every sibling session joins before any can finish. The
        # join order is the session order verl spawns (v1 passes it as the int `session_id`).
        group = self.groups.join(uid, session)
        indexed = isinstance(session, int) and not isinstance(session, bool)
        look_on = look_on_kind(sample, self.options.seed, step, self.options.look_on_share, self.options.look_on_starts)
        plan = origin_plan(sample, session if indexed else group.order.index(session), self.options.seed, step, look_on)
        if not indexed:
            # verl's legacy worker passes no session index and may split a prompt's sessions across
            # workers, where join orders would repeat an index: seed from the session's own id then
            # (distinct samples, but not reproducible across runs).
            plan = dataclasses.replace(plan, seed=stable_seed(plan.seed, str(session)))
        perturbed_task = None
        if kinds:
            perturbed_task = self.groups.start_perturbed(group, lambda n: self._perturbed_groups(sample, sampling_params, kinds, n, step, uid))
        try:
            result = await self._episode(sample, sampling_params, plan)
            if config.needs_continuations() and result.failure is None:
                rates = await self._success_rates(sample, result.messages, sampling_params, plan, step)
                if rates is not None:
                    result.summary = dataclasses.replace(result.summary, metadata={**result.summary.metadata, "success_rates": rates})
                    result.trajectory.metrics["success_rates"] = rates  # as run_rollouts records them
        except BaseException:
            self.groups.leave(group, session)
            raise

        self._fill_weight_versions(result.server_fields, kwargs.get("global_steps"))
        record = self._record(sample, result, plan)
        # The per-step tool-use aggregate and collapse warning (group.StepToolUse), of training episodes:
        # verl passes the loop no validation flag; its validation decodes greedily (val_kwargs), training samples.
        if result.failure is None and float(sampling_params.get("temperature", 1.0) or 0.0) > 0:
            self.tool_use().add(step, facts_of_trajectory(result.trajectory))
        if not kinds or result.failure is not None:
            self.groups.leave(group, session)
        else:
            perturbed, mask_info = await perturbed_task
            record["perturbed"] = {k: len(v) for k, v in perturbed.items()}
            total, components = await self.groups.reward(
                group, session, result.summary, lambda origins: self._score_group(sample, origins, perturbed, mask_info)
            )
            record["group_reward"] = float(total)
            record["group_components"] = {k: float(v) for k, v in components.items()}
        if self.episode_dump is not None:
            self._dump_episode(sample, result, record, dump_key(uid, session), kwargs.get("global_steps"))
        return self._output(result, record)

    def _dump_episode(self, sample: VideoSample, result: EpisodeResult, record: dict[str, Any], key: str, step: Any) -> None:
        """The episode for the viewer, beside verl's v1 dump, which holds its text only
        (`episode_dump.py`): the env's trajectory, with the reward verl trains on."""
        from videoseek.rewards import accuracy_reward

        traj = result.trajectory
        if record["group_reward"] is not None:
            traj.reward, traj.reward_components = record["group_reward"], dict(record["group_components"])
        else:
            traj.reward, traj.reward_components = record["reward"], dict(record["reward_components"])
        self.episode_dump.write(key, step, accuracy_reward(result.summary.prediction, sample), episode_view(sample, record), traj)

    def _record_reward(self, sample: VideoSample, result: EpisodeResult) -> tuple[float, dict[str, float]]:
        from videoseek.rewards import score_episode

        total, components = score_episode(sample, result.summary, self.options.reward)
        return float(total), {k: float(v) for k, v in components.items()}

    # The weights version (`global_steps`) the servers of this worker process reported last.
    last_weights_version: int | None = None

    def _fill_weight_versions(self, fields: dict[str, Any], prompt_step: Any) -> None:
        """Make sure `min/max_global_steps` are set: verl's v1 trainer reads them as ints from every trajectory.

        They come from the server with each turn; an episode whose server failed before answering
        has none, and gets the version the servers last reported here (else the step before the
        prompt's, the weights a synchronous trainer samples with).
        """
        version = fields.get("max_global_steps", fields.get("global_steps"))
        if version is not None:
            type(self).last_weights_version = version
        elif self.last_weights_version is not None:
            version = self.last_weights_version
        else:
            version = max(int(prompt_step) - 1, 0) if isinstance(prompt_step, (int, float)) else 0
        fields.setdefault("min_global_steps", version)
        fields.setdefault("max_global_steps", version)

    # ---- one episode -------------------------------------------------------------------------
    async def _episode(self, sample: VideoSample, sampling_params: dict[str, Any], plan: EpisodePlan) -> EpisodeResult:
        """Play one planned episode against the server; see the module docstring for the token layout."""
        loop = asyncio.get_running_loop()
        episode_id = plan.episode_id
        # share_frames: the episodes on one video hold one read-only copy of the frames they all see.
        env_config = episode_env_config(self.env_config, plan.seed, self.options.initial_frames)  # frame-budget gating
        env = await loop.run_in_executor(None, lambda: VideoSeekEnv(sample, env_config, share_frames=True))
        options = {"perturbation": plan.perturbation, "episode_id": episode_id, "policy": "verl",
                   "group": {"id": plan.group_id, "index": plan.index}}  # fmt: skip
        obs, info = await loop.run_in_executor(None, lambda: env.reset(seed=plan.seed, options=options))
        # The env's own instructions (the no-tool prompt with EnvConfig(tools=False)), as run_rollouts gives them.
        messages: list[Message] = initial_messages(obs, info["instructions"])
        forced = look_on_start(sample, env.evidence.duration, plan.look_on) if plan.look_on else []  # the start's turns, not the policy's
        # The conversation is rendered incrementally: each turn renders, tokenises and processes only
        # its own messages (RenderState); the loop never reads the concatenated pixel values.
        state = await loop.run_in_executor(None, lambda: self.renderer.start(messages))
        prompt_ids = state.prompt_ids()
        if len(prompt_ids) > self.prompt_length:
            raise ValueError(
                f"sample {sample.id}: the first prompt has {len(prompt_ids)} tokens, more than rollout.prompt_length="
                f"{self.prompt_length}; lower env.initial_frames / env.max_pixels or raise the prompt length"
            )
        ids = list(prompt_ids)
        videos = list(state.videos)
        grid = state.video_grid_thw()
        mask: list[int] = []
        logprobs: list[float] | None = []  # None once a turn comes without them
        server_fields: dict[str, Any] = {}
        metrics = {"generate_sequences": 0.0, "tool_calls": 0.0}
        turns, tool_turns, ended_by, failure = 0, 0, "env", None
        request_id = uuid4().hex
        try:
            while True:
                budget = self.response_length - len(mask)
                if budget <= 0:
                    ended_by = "budget"
                    break
                if forced:  # a forced turn: context for the policy, as a tool answer is (mask 0, never sent to the server)
                    text, cut = forced.pop(0), False
                    generated = prefix_token_ids(self.tokenizer, text) + [self.end_of_turn_id]
                    messages.append(assistant_message(text, generated, forced=True))
                    mask += [0] * len(generated)
                    if logprobs is not None:
                        logprobs += [0.0] * len(generated)
                else:
                    t0 = time.perf_counter()
                    params = {**self._turn_params(sampling_params, budget), "seed": turn_seed(plan.seed, turns)}
                    out = await self._generate(request_id, ids, params, videos, grid)
                    metrics["generate_sequences"] += time.perf_counter() - t0
                    merge_server_fields(server_fields, out.extra_fields or {})
                    generated, cut = self._policy_tokens(out.token_ids, budget)
                    content = generated[:-1] if generated and generated[-1] == self.end_of_turn_id else generated
                    text = self.tokenizer.decode(content, skip_special_tokens=False, clean_up_tokenization_spaces=False)
                    messages.append(assistant_message(text, generated))
                    mask += [1] * len(generated)
                    if logprobs is not None and out.log_probs is not None and len(out.log_probs) >= len(generated):
                        logprobs += [float(x) for x in out.log_probs[: len(generated)]]
                    else:
                        logprobs = None
                ids += generated
                turns += 1

                t0 = time.perf_counter()
                # A turn cut before vision markup is an invalid turn: it costs a turn and counts for the penalties.
                action = Invalid("the policy wrote vision markup (<|vision_start|>, <|video_pad|>, ...)") if cut else text
                obs, _, terminated, truncated, _ = await loop.run_in_executor(None, lambda action=action: env.step(action))
                # as run_rollouts records a turn's tokens (the `tokens` metric, envs.metrics); a forced turn has none
                if messages[-1].forced:
                    env.trajectory.turns[-1].forced = True
                else:
                    env.trajectory.turns[-1].tokens = {"prompt": len(ids) - len(generated), "completion": len(generated)}
                if terminated or truncated or cut:
                    ended_by = "vision_token" if cut else "env"
                    metrics["tool_calls"] += time.perf_counter() - t0
                    break
                messages.append(tool_message(obs))
                rendered_before = len(state.ids)  # ids[rendered_before:] = generation prompt + this turn
                await loop.run_in_executor(None, lambda: state.extend(messages[-2:]))
                metrics["tool_calls"] += time.perf_counter() - t0
                new_ids = state.ids[rendered_before:] + state.generation_prompt_ids()
                turn_ids = ids[rendered_before:]
                if new_ids[: len(turn_ids)] != turn_ids:
                    raise TemplateError(f"sample {sample.id}: the rendered conversation does not extend the generated tokens")
                delta = new_ids[len(turn_ids) :]
                if len(mask) + len(delta) >= self.response_length:
                    # As verl's ToolAgentLoop: a tool turn that does not fit is left out (cutting it
                    # would separate a video placeholder from its frames).
                    ended_by = "budget"
                    break
                ids += delta
                mask += [0] * len(delta)
                if logprobs is not None:
                    logprobs += [0.0] * len(delta)  # tool tokens: masked, never read
                videos = list(state.videos)
                grid = state.video_grid_thw()
                tool_turns += 1
        except (GenerationError, TemplateError, OSError, RuntimeError, ValueError) as exc:
            failure = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            logger.warning("videoseek episode %s failed: %s", episode_id, failure)
            ended_by, mask = "failure", [0] * len(mask)

        summary = env.summary()
        if ended_by in ("budget", "vision_token") and not summary.truncated:
            summary = dataclasses.replace(summary, truncated=True)
        trajectory = env.trajectory
        trajectory.truncated = summary.truncated
        trajectory.failure = failure
        trajectory.metrics["ended_by"] = ended_by
        return EpisodeResult(
            trajectory=trajectory,
            prompt_ids=prompt_ids,
            response_ids=ids[len(prompt_ids) :],
            response_mask=mask,
            response_logprobs=logprobs,
            videos=videos,
            messages=messages,
            summary=summary,
            evidence={k: float(v) for k, v in env.evidence.snapshot().items()},
            turns=turns,
            tool_turns=tool_turns,
            ended_by=ended_by,
            failure=failure,
            metrics=metrics,
            server_fields=server_fields,
        )

    def server_prompt_ids(self, prompt_ids: list[int], video_grid_thw: Any = None) -> list[int]:
        """The ids sent to the server for the rendered (training) `prompt_ids`: one placeholder per
        video, in the form vLLM's processor expands back into exactly `prompt_ids`."""
        return vllm_prompt_ids(prompt_ids, self.processor, video_grid_thw)

    async def _generate(self, request_id: str, prompt_ids: list[int], params: dict[str, Any], videos: list[Any], video_grid_thw: Any = None) -> Any:
        """One turn from verl's server manager for the rendered `prompt_ids` (sent with one
        placeholder per video); any server error becomes a `GenerationError`."""
        try:
            sent = self.server_prompt_ids(prompt_ids, video_grid_thw)
        except ValueError as exc:  # ids the processor did not write: a template / renderer bug
            raise TemplateError(f"cannot collapse the prompt's videos for the server: {exc}") from exc
        try:
            return await self.server_manager.generate(
                request_id=request_id,
                prompt_ids=sent,
                sampling_params=params,
                video_data=videos or None,
                mm_processor_kwargs=self.mm_processor_kwargs,
            )
        except Exception as exc:  # noqa: BLE001 - the server's failure ends this episode, not the group
            raise GenerationError(f"generate failed: {type(exc).__name__}: {exc}") from exc

    def _turn_params(self, sampling_params: dict[str, Any], budget: int) -> dict[str, Any]:
        """verl's sampling params for one turn: capped by the turn limit and the response budget."""
        params = {**sampling_params, "max_tokens": min(self.options.max_turn_tokens, budget)}
        if self.options.stop:
            params.update(stop=list(self.options.stop), include_stop_str_in_output=True)
        return params

    def _policy_tokens(self, token_ids: list[int], budget: int) -> tuple[list[int], bool]:
        """The turn's tokens within the budget, cut before any vision markup; (tokens, was_cut)."""
        generated = [int(t) for t in token_ids][:budget]
        cut = next((k for k, t in enumerate(generated) if t in self.forbidden_ids), None)
        return (generated, False) if cut is None else (generated[:cut], True)

    # ---- groups ------------------------------------------------------------------------------
    async def _perturbed_groups(
        self, sample: VideoSample, sampling_params: dict[str, Any], kinds: list[str], origin_size: int, step: int, uid: str
    ) -> tuple[dict[str, list[EpisodeSummary]], dict[str, Any] | None]:
        """Run each perturbed group the reward config needs (`agents.groups.perturbed_plans`: G~
        episodes each, a mask group only for a sample with patterns); failed episodes are dropped
        from scoring. With an episode dump, each perturbed episode's trajectory is written under
        the prompt's uid (verl never sees these episodes, so only this dump keeps them)."""
        plans = perturbed_plans(sample, kinds, self.options.perturbed_group_size or origin_size, self.options.seed, step)
        results = await asyncio.gather(*[self._episode(sample, sampling_params, p) for p in plans], return_exceptions=True)
        out: dict[str, list[EpisodeSummary]] = {}
        for p, r in zip(plans, results):
            kind = p.perturbation["kind"]
            out.setdefault(kind, [])
            if isinstance(r, EpisodeResult) and r.failure is None:
                out[kind].append(r.summary)
            if isinstance(r, EpisodeResult) and self.episode_dump is not None:
                r.trajectory.reward, r.trajectory.reward_components = self._record_reward(sample, r)
                self.episode_dump.write(f"{uid}/{p.episode_id}", step, float(r.trajectory.accuracy or 0.0), None, r.trajectory, group_key=uid)
        return out, mask_of(plans)

    async def _success_rates(
        self, sample: VideoSample, messages: list[Message], sampling_params: dict[str, Any], plan: EpisodePlan, step: int
    ) -> list[float] | None:
        """ProcessThinker's c_i (seed 004, eq. 2): for each step prefix p_i (i <= K_max), the share of
        M continuations sampled after p_i whose final answer is correct.

        A continuation is one assistant turn sampled from the conversation cut right after the
        i-th `</step>` (in whichever assistant turn that step lies), with the frames seen up to
        there; a continuation that calls the tool instead of answering counts as a failure (our
        choice: the seed is single-turn, and replaying tool calls would multiply the cost). None
        when the response is not format-valid: the seed samples no continuation then (r = 0).
        """
        p = self.options.reward.process_thinker
        prefixes = continuation_prefixes(messages, self.options.reward)
        if not prefixes:
            return None
        loop = asyncio.get_running_loop()
        rates = []
        for i, (k, prefix_text) in enumerate(prefixes):
            # What the server needs only (ids, raw videos, their grid): no pixel values concatenated.
            state = await loop.run_in_executor(None, lambda k=k: self.renderer.start(messages[:k]))
            prompt = state.prompt_ids() + prefix_token_ids(self.tokenizer, prefix_text)
            videos = list(state.videos)
            grid = state.video_grid_thw()
            params = self._turn_params(sampling_params, self.options.max_turn_tokens)
            turn = sum(1 for m in messages[:k] if m.role == "assistant")
            # each continuation seeded as the batched driver's continuation episodes are (agents.groups)
            seeds = [turn_seed(episode_seed(self.options.seed, step, continuation_id(plan.episode_id, i + 1, m)), turn) for m in range(p.num_continuations)]
            outs = await asyncio.gather(
                *[self._generate(uuid4().hex, prompt, {**params, "seed": seed}, videos, grid) for seed in seeds],
                return_exceptions=True,
            )
            outs = [o for o in outs if not isinstance(o, BaseException)]  # a failed sample is no evidence either way
            if not outs:
                logger.warning("videoseek: every continuation of sample %s failed; no process reward for this episode", sample.id)
                return None
            wins = 0
            for out in outs:
                generated, _ = self._policy_tokens(out.token_ids, self.options.max_turn_tokens)
                text = prefix_text + self.tokenizer.decode(
                    [t for t in generated if t != self.end_of_turn_id], skip_special_tokens=False, clean_up_tokenization_spaces=False
                )
                wins += continuation_succeeds(sample, text, self.options.reward.correct_threshold)
            rates.append(wins / len(outs))
        return rates

    async def _score_group(
        self, sample: VideoSample, origins: list[EpisodeSummary], perturbed: dict[str, list[EpisodeSummary]], mask_info: dict | None
    ) -> list[tuple[float, dict[str, float]]]:
        """`score_group` over the origin group; per-episode scores when the group reward cannot be
        formed (e.g. a DM-GRPO sample without mask patterns, or every perturbed episode failed),
        as the local rollout runner does."""
        def score() -> list[tuple[float, dict[str, float]]]:
            scores, error = score_origin_group(sample, origins, perturbed, self.options.reward, perturbation=mask_info)
            if error is not None:
                logger.warning("videoseek group reward of sample %s fell back to per-episode scores: %s", sample.id, error)
            return scores

        return await asyncio.get_running_loop().run_in_executor(None, score)

    # ---- output ------------------------------------------------------------------------------
    def _record(self, sample: VideoSample, result: EpisodeResult, plan: EpisodePlan) -> dict[str, Any]:
        """What `compute_score` and the logs read (`records.py`): the episode, its calls (the retrieved
        spans, the accepted calls per tool and the env's tools), its `EpisodeFacts` (the tool-use
        metrics' input, `records.loop_call_fields`), evidence and rewards."""
        total, components = self._record_reward(sample, result)
        return {
            "sample_id": sample.id,
            "episode_id": plan.episode_id,
            "group_index": plan.index,
            "reward_preset": self.options.reward.preset,
            "reward_config": self.options.reward.model_dump(mode="json"),
            "episode": summary_to_dict(result.summary),
            "calls": [[float(s), float(e)] for s, e in result.summary.calls],
            **loop_call_fields(result.trajectory, [schema["function"]["name"] for schema in self.tool_schemas]),
            "evidence": result.evidence,
            "reward": float(total),
            "reward_components": {k: float(v) for k, v in components.items()},
            "turns": result.turns,
            "ended_by": result.ended_by,
            "failure": result.failure,
            "group_reward": None,
            "group_components": None,
        }

    def _output(self, result: EpisodeResult, record: dict[str, Any]) -> AgentLoopOutput:
        response_ids, response_mask, logprobs = result.response_ids, result.response_mask, result.response_logprobs
        if not response_ids:
            # No token was kept (vision markup first, or the server failed at once). verl's
            # post-processing puts the reward on the last response token (`rm_scores[-1]`), so an
            # empty response would raise and lose the whole group: keep one masked end-of-turn.
            response_ids, response_mask = [self.end_of_turn_id], [0]
            logprobs = [0.0] if logprobs is not None else None
        multi_modal_data = {"videos": result.videos} if result.videos else {}
        if self.options.over_turn_mask and result.summary.truncated:  # Mini-o3: no loss, no baseline (as a failure)
            response_mask = [0] * len(response_mask)
        output_class = AgentLoopOutput
        if self.options.turn_rewards:  # the turn rewards ride on rm_scores (estimators.place_turn_rewards)
            record["turn_rewards"] = turn_rewards_of(result.trajectory.turns, self.options.reward) if any(response_mask) else []
            output_class = TurnRewardOutput
        return output_class(
            prompt_ids=result.prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs,
            multi_modal_data=multi_modal_data,
            mm_processor_kwargs=dict(self.renderer.vision_kwargs),
            num_turns=1 + result.turns + result.tool_turns,  # user, assistant and tool turns, as verl counts
            metrics=AgentLoopMetrics(**result.metrics),
            # The server's fields (min/max_global_steps, ...) as verl's own loops carry them, plus ours.
            extra_fields={**result.server_fields, EXTRA_KEY: record},
        )

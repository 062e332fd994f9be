#!/usr/bin/env python
"""Train a video agent with CS-GRPO (or DM-GRPO, T-GRPO, PRR, ProcessThinker): one entry point.

    python training/run_csgrpo.py                         # CPU smoke run: synthetic set, tiny model, local GRPO
    python training/run_csgrpo.py --reward dmgrpo --steps 20
    python training/run_csgrpo.py --backend verl --dry-run                  # compose + validate verl's config
    python training/run_csgrpo.py --backend verl --config qwen25vl_7b_8gpu --data train.jsonl
    python training/run_csgrpo.py --tools crop_video,zoom                   # the env's tools (default: crop_video)

Two backends share the data, the reward presets and the verl algorithm config:

- `local` (default without a CUDA GPU and vLLM): GRPO in this process with the transformers
  policy. Each step plays G episodes per question through `VideoSeekEnv` (plus the preset's
  perturbed groups), scores them with the preset, normalises advantages within each origin group
  and takes one clipped policy-gradient step with a KL penalty to the frozen reference, using
  verl's own `core_algos` functions. Metrics go to the console and RUN/metrics.jsonl, each step's
  trajectories to RUN/rollouts/step_NNNN (open with `videoseek view`), the model to RUN/checkpoint.
- `verl` (default with CUDA and vLLM): exports the samples to parquet, composes verl's hydra
  config (vLLM rollout, the VideoSeek agent loop, the reward function, the `videoseek_grpo`
  estimator, batch and length settings, GPUs), validates it, prints the full command and runs
  `python -m verl.trainer.main_ppo`. `--dry-run` stops after writing RUN/verl_config.yaml and
  RUN/command.sh: it needs no GPU.

Both backends play the env of `EnvConfig(**env)`, the ready config's `env:` with `--tools` on top:
the local backend's rollouts and RUN/run.json, verl's rows (`export-verl`: the tools' system
prompt and `tools_kwargs`) and the agent-loop YAML (RUN/agent_loop.yaml, which `--dry-run` writes
and whose tools it prints).

The script reads top to bottom: arguments, data, model, then either backend.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: drop training/ from the path (its modules are videoseek.training.*)
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

# The CPU smoke run: small enough for a laptop or CI, large enough to exercise every path.
SMOKE = {
    "group_size": 4,
    "batch_size": 2,
    "steps": 10,
    "max_turn_tokens": 48,
    "prompt_length": 2048,
    "response_length": 512,
    "env": {"initial_frames": 4, "frames_per_call": 4, "max_turns": 3, "max_total_frames": 16, "max_pixels": 112 * 112},
}


# ---- 1. arguments ------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from videoseek.rewards.presets import PRESETS, preset_help

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("local", "verl"), default=None, help="default: verl with CUDA and vLLM, else local")
    p.add_argument("--reward", choices=PRESETS, default=None, help=f"reward preset (default csgrpo, or the --config's), with its counted components: {preset_help()}")
    p.add_argument("--config", default=None, help="a ready config: name in training/configs (qwen25vl_7b_8gpu, qwen25vl_3b_1gpu) or a YAML path")
    p.add_argument("--model", default=None, help="Hugging Face checkpoint folder (default: the tiny offline Qwen2.5-VL)")
    p.add_argument("--data", default=None, help="samples JSONL or verl parquet (default: a synthetic set, generated if absent)")
    p.add_argument("--tools", default=None, metavar="TOOL,TOOL,...",
                   help="the env's tools (EnvConfig.tools), comma-separated: registered names (crop_video, zoom) or import paths "
                        "'package.module:Class' / 'path/to/file.py:Class'; '' for none (default: the --config's, else crop_video)")
    p.add_argument("--val-data", default=None, help="validation parquet/JSONL for verl (default: 10%% of --data)")
    p.add_argument("--group-size", type=int, default=None, help="rollouts per question G")
    p.add_argument("--batch-size", type=int, default=None, help="questions per step")
    p.add_argument("--steps", type=int, default=None, help="GRPO steps")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 1e-6)")
    p.add_argument("--kl-coef", type=float, default=None, help="KL-to-reference loss weight (default 0.01)")
    p.add_argument("--n-gpus", type=int, default=None, help="GPUs per node for verl")
    p.add_argument("--out", default=None, help="run directory (default runs/<preset>)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic set, the split, the tiny model, the sampling and the data order (default 0)")
    p.add_argument("--device", default=None, help="local backend: cuda or cpu (default cuda when available)")
    p.add_argument("--threads", type=int, default=None, help="local backend: torch CPU threads (1 is fastest on a busy machine)")
    p.add_argument("--collapse-threshold", type=float, default=0.1,
                   help="local backend: warn once when the share of episodes with an accepted tool call (crop_rate) stays below this (default 0.1) ...")
    p.add_argument("--collapse-steps", type=int, default=5, help="... for this many steps in a row (default 5)")
    p.add_argument("--synthetic-n", type=int, default=16, help="size of the generated synthetic set (default 16)")
    p.add_argument("--dry-run", action="store_true", help="compose and validate verl's config, write it, start nothing")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="local backend: continue RUN from its last checkpoint (model, optimizer, step)")
    again.add_argument("--overwrite", action="store_true", help="local backend: delete RUN's metrics, rollouts and checkpoint first")
    p.add_argument("--save-every", type=int, default=10, help="local backend: write RUN/checkpoint every N steps and at the end (default 10)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra verl override (repeatable)")
    p.add_argument("--record-tokens", action="store_true",
                   help="local backend: also write each episode's tokens (text, mask, sampling and reference log-probs, entropy) "
                        "to RUN/rollouts/step_NNNN/tokens.jsonl; grpo.json (groups, advantages, token counts) is always written")
    p.add_argument("--probe-data", default=None, metavar="PATH",
                   help="fixed probe questions (samples JSONL; default: the training samples) evaluated greedily every --probe-every steps")
    p.add_argument("--probe-every", type=int, default=None, metavar="N",
                   help="evaluate the probes before training and every N steps (and at the last); default 0 (off), 5 with --probe-data. "
                        "Local: RUN/probes/step_NNNN/trajectories.jsonl; verl: its validation (trainer.test_freq, data.val_files, trainer.validation_data_dir=RUN/probes)")
    p.add_argument("--advantage", choices=("trajectory", "turn"), default=None,
                   help="GRPO's credit: 'trajectory' (videoseek_grpo, one advantage per episode; the default) or 'turn' "
                        "(videoseek_turn_grpo: the outcome advantage plus the normalised reward-to-go of CS-GRPO's step signal, per turn; "
                        "docs/training.md, 'Turn-level credit'); both backends")
    p.add_argument("--over-turn-mask", action="store_true",
                   help="Mini-o3's over-turn masking: an episode cut by the turn limit (or a length budget) contributes no loss "
                        "and no baseline, instead of a low reward that teaches the policy to stop searching; both backends")
    p.add_argument("--initial-frames", default=None, metavar="N,N,...",
                   help="frame-budget gating (ParaVT): each training episode's initial frames drawn from these, e.g. 2,4,8,16, "
                        "so that calling the tool earns credit (probes keep the env's); both backends")
    p.add_argument("--look-on-share", type=float, default=None, metavar="F",
                   help="the share of each step's groups that start in the look-on state: two forced crops that missed "
                        "(agents.groups.look_on_start, not trained on), so that the group's G episodes differ only in what the "
                        "policy decides then; both backends (default: the config's loop.look_on_share, else 0; learn_cpu: 0.25)")
    p.add_argument("--look-on-starts", default=None, metavar="KIND,KIND,...",
                   help="the kinds of forced start those groups draw from (agents.groups.look_on_start): two_misses (the look-on "
                        "state), first_window (an exploring start: the first quarter window, whatever it shows); default: the "
                        "config's loop.look_on_starts, else two_misses")
    p.add_argument("--vision-reuse", action="store_true",
                   help="local backend, frozen vision tower: the policy forward reuses the reference forward's vision-tower "
                        "hidden states (exact; bench/bench_vision_reuse.py)")
    p.add_argument("--probe-n", type=int, default=4, metavar="K", help="probe questions: the first K of --probe-data (default 4)")
    return p.parse_args(argv)


def probe_every(args: argparse.Namespace) -> int:
    """Steps between probe evaluations: --probe-every, else 5 when --probe-data is given, else 0 (off)."""
    every = args.probe_every if args.probe_every is not None else (5 if args.probe_data else 0)
    if every < 0 or args.probe_n < 1:
        from videoseek.training.verl_plugin.config import ConfigError

        raise ConfigError(f"--probe-every must be >= 0 and --probe-n >= 1 (got {every}, {args.probe_n})")
    return every


def load_probes(args: argparse.Namespace, samples: list) -> list:
    """The first --probe-n samples of --probe-data (or of the training samples): the same questions every time."""
    from videoseek.envs.sample import VideoSample

    pool = VideoSample.from_jsonl(args.probe_data) if args.probe_data else list(samples)
    return pool[: args.probe_n]


def default_backend() -> str:
    import torch

    has_vllm = importlib.util.find_spec("vllm") is not None
    return "verl" if torch.cuda.is_available() and has_vllm else "local"


def build_spec(args: argparse.Namespace, model: str, train_files: list[str], val_files: list[str]):
    """A `TrainSpec` from the smoke defaults, then the ready config, then the command line."""
    from videoseek.training.verl_plugin.config import TrainSpec, load_ready_config

    values = copy.deepcopy(SMOKE) | {"reward": "csgrpo", "lr": 1e-6, "kl_coef": 0.01}
    if args.config:
        ready = load_ready_config(args.config)
        values.update({k: v for k, v in ready.items() if k not in ("description", "requires", "model")})
    cli = {
        "reward": args.reward, "group_size": args.group_size, "batch_size": args.batch_size, "steps": args.steps,
        "lr": args.lr, "kl_coef": args.kl_coef, "n_gpus": args.n_gpus, "seed": args.seed,
    }  # fmt: skip
    values.update({k: v for k, v in cli.items() if v is not None})
    if args.tools is not None:
        values["env"] = {**values.get("env", {}), "tools": cli_tools(args.tools)}
    overrides = dict(values.pop("overrides", {}) or {})
    loop = dict(values.pop("loop", {}) or {})
    if getattr(args, "advantage", None) == "turn":  # the estimator reads the turn rewards the agent loop places
        from videoseek.training.verl_plugin.estimators import TURN_ESTIMATOR_NAME

        overrides["algorithm.adv_estimator"] = TURN_ESTIMATOR_NAME
        loop["turn_rewards"] = True
    if getattr(args, "over_turn_mask", False):
        loop["over_turn_mask"] = True
    if getattr(args, "initial_frames", None):
        loop["initial_frames"] = initial_frame_choices(args.initial_frames)
    share = getattr(args, "look_on_share", None)
    if share is not None:
        if not 0.0 <= share <= 1.0:
            from videoseek.training.verl_plugin.config import ConfigError

            raise ConfigError(f"--look-on-share {share}: expected a share in [0, 1]")
        loop["look_on_share"] = float(share)
    starts = getattr(args, "look_on_starts", None)
    if starts is not None:
        from videoseek.agents.groups import LOOK_ON_STARTS
        from videoseek.training.verl_plugin.config import ConfigError

        kinds = [k.strip() for k in starts.split(",") if k.strip()]
        if not kinds or any(k not in LOOK_ON_STARTS for k in kinds):
            raise ConfigError(f"--look-on-starts {starts!r}: expected kinds among {', '.join(LOOK_ON_STARTS)}, comma-separated")
        loop["look_on_starts"] = kinds
    if loop:
        values["loop"] = loop
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--override {item!r}: expected KEY=VALUE")
        overrides[key] = _yaml_value(value)
    out = args.out or f"runs/{values['reward']}"
    return TrainSpec(model=model, train_files=train_files, val_files=val_files, out=out, overrides=overrides, **values)


def initial_frame_choices(text: str) -> list[int]:
    """The counts of `--initial-frames 2,4,8,16`; ConfigError for anything but positive integers."""
    from videoseek.training.verl_plugin.config import ConfigError

    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ConfigError(f"--initial-frames {text!r}: expected positive integers separated by commas, e.g. 2,4,8,16")
    return values


def cli_tools(text: str) -> list[str]:
    """The tool specs of `--tools`; a file path ("path/to/file.py:Class") made absolute, so that verl's
    Ray workers, started in another folder, import the same file. ConfigError naming an unknown tool."""
    from videoseek.training.exports.verl_parquet import parse_tools
    from videoseek.training.verl_plugin.config import ConfigError

    try:
        tools = parse_tools(text)
    except ValueError as exc:
        raise ConfigError(f"--tools: {exc}") from None
    out = []
    for spec in tools:
        module, sep, name = spec.rpartition(":")
        out.append(f"{Path(module).resolve()}{sep}{name}" if sep and module.endswith(".py") else spec)
    return out


def _yaml_value(text: str):
    import yaml

    return yaml.safe_load(text)


# ---- 2. data -----------------------------------------------------------------------------------
def load_samples(args: argparse.Namespace, run_dir: Path):
    """The samples of --data (JSONL), or the synthetic set under RUN/data (generated on first use)."""
    from videoseek.envs.sample import VideoSample
    from videoseek.envs.synth import generate_dataset

    if args.data:
        return VideoSample.from_jsonl(args.data)
    path = run_dir / "data" / "samples.jsonl"
    if path.exists():
        return VideoSample.from_jsonl(path)
    print(f"generating {args.synthetic_n} synthetic samples in {path.parent}", flush=True)
    return generate_dataset(path.parent, n=args.synthetic_n, seed=args.seed)


# ---- 3. model ----------------------------------------------------------------------------------
def model_path(args: argparse.Namespace) -> str:
    if args.model:
        return args.model
    if args.config:
        from videoseek.training.verl_plugin.config import load_ready_config

        ready_model = load_ready_config(args.config).get("model")
        if ready_model:
            return ready_model
    from videoseek.agents.tiny_model import ensure_tiny_model

    return str(ensure_tiny_model(seed=args.seed))


# ---- 4a. the verl backend ----------------------------------------------------------------------
def run_verl(args: argparse.Namespace) -> int:
    from videoseek.envs.env import EnvConfig
    from videoseek.training.exports.verl_parquet import export_samples, split_samples
    from videoseek.training.verl_plugin.config import (
        compose,
        main_ppo_command,
        shell_line,
        validate,
        verl_overrides,
        write_agent_loop_yaml,
    )

    model = model_path(args)
    run_dir = build_spec(args, model, [], []).run_dir
    from_parquet = bool(args.data and args.data.endswith(".parquet"))
    if from_parquet:
        train_files, val_files = [args.data], [args.val_data or args.data]
    else:
        train_files, val_files = [str(run_dir / "data" / "train.parquet")], [str(run_dir / "data" / "val.parquet")]
    every = probe_every(args)
    if every:  # probes are verl's validation: the probe set as val data, greedy (verl's val_kwargs), dumped under RUN/probes
        val_files = [str(run_dir / "data" / "probe.parquet")]
        args.override = [*args.override, f"trainer.test_freq={every}", f"trainer.validation_data_dir={(run_dir / 'probes').resolve()}",
                         "trainer.val_before_train=true"]  # fmt: skip
    spec = build_spec(args, model, train_files, val_files)
    overrides = verl_overrides(spec, write_agent_loop_yaml(spec))
    command = main_ppo_command(overrides)
    print(shell_line(command), flush=True)
    cfg = compose(overrides)  # an unknown key or bad value fails here, before any work
    if not from_parquet:  # the samples as verl rows (frames of the initial observation included)
        samples = load_samples(args, run_dir)
        train, val = split_samples(samples, 0.1, seed=args.seed)
        env_config = EnvConfig(**spec.env)
        export_samples(train, run_dir / "data", "train", env_config)
        export_samples(val or train[:1], run_dir / "data", "val", env_config)
    if every:
        if from_parquet and not args.probe_data:
            from videoseek.training.verl_plugin.config import ConfigError

            raise ConfigError("--probe-every with a parquet --data needs --probe-data samples.jsonl (the probe questions)")
        export_samples(load_probes(args, [] if args.probe_data else load_samples(args, run_dir)), run_dir / "data", "probe", EnvConfig(**spec.env))
    for warning in validate(cfg):
        print(f"warning: {warning}", flush=True)
    from omegaconf import OmegaConf

    (run_dir / "verl_config.yaml").write_text(OmegaConf.to_yaml(cfg), encoding="utf-8")
    (run_dir / "command.sh").write_text("#!/bin/sh\n" + shell_line(command) + "\n", encoding="utf-8")
    print(f"verl config valid: {run_dir / 'verl_config.yaml'}", flush=True)
    write_run_manifest(run_dir, args, spec, every, args.probe_n if every else 0)
    tools = EnvConfig(**spec.env).tools
    print(f"env tools: {', '.join(tools) or 'none (no-tool baseline)'} ({run_dir / 'agent_loop.yaml'})", flush=True)
    if args.dry_run:
        return 0
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "videoseek.training.verl_plugin.plugin"}
    return subprocess.call(command, env=env)


# ---- 4b. the local backend: GRPO in one process ------------------------------------------------
def run_local(args: argparse.Namespace) -> int:
    # First: it pins the CPU kernels, which a tensor op in the imports below (verl's) would fix.
    from videoseek.training.local_backend.determinism import make_deterministic

    determinism = make_deterministic(args.seed, args.threads)
    import numpy as np
    import torch
    from verl.utils.config import omega_conf_to_dataclass
    from videoseek.agents.hf_policy import TransformersPolicy
    from videoseek.agents.rollout import run_rollouts
    from videoseek.envs.metrics import began_with_forced_start, look_on_rate
    from videoseek.envs.tools import tool_names
    from videoseek.training.local_backend.collapse import CollapseWatch, call_push, tool_use_metrics
    from videoseek.training.local_backend.grpo import grpo_update
    from videoseek.training.local_backend.sft import freeze_vision_encoder
    from videoseek.training.local_backend.rollout import (
        RecordingPolicy,
        rollout_metrics,
        step_record,
        training_batch,
        varied_groups,
    )
    from videoseek.training.verl_plugin.config import (
        ConfigError,
        compose,
        spec_env_config,
        verl_overrides,
        write_agent_loop_yaml,
    )

    try:
        watch = CollapseWatch(args.collapse_threshold, args.collapse_steps)
    except ValueError as exc:
        raise ConfigError(f"--collapse-threshold/--collapse-steps: {exc}") from None
    model = model_path(args)
    spec = build_spec(args, model, [], [])
    run_dir = spec.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    done_steps = previous_steps(run_dir, args)
    samples = load_samples(args, run_dir)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")

    # verl's actor config (clip ratios, loss aggregation, KL type and weight): the same numbers a verl run uses.
    cfg = compose(verl_overrides(spec, write_agent_loop_yaml(spec)))
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    dynamic = omega_conf_to_dataclass(cfg.algorithm.filter_groups)  # enable, max_num_gen_batches (metric: the reward)
    norm_by_std = bool(cfg.algorithm.norm_adv_by_std_in_grpo)  # False: Dr. GRPO's r - mean
    from videoseek.training.verl_plugin.estimators import ESTIMATOR_NAME, TURN_ESTIMATOR_NAME

    estimator = str(cfg.algorithm.adv_estimator)
    if estimator not in (ESTIMATOR_NAME, TURN_ESTIMATOR_NAME):
        raise ConfigError(f"algorithm.adv_estimator: the local backend runs {ESTIMATOR_NAME} or {TURN_ESTIMATOR_NAME} (got {estimator!r})")
    turn_weight = cfg.algorithm.get("videoseek_turn_weight", None)
    if dynamic.enable and dynamic.metric not in (None, "reward"):
        raise ConfigError(f"algorithm.filter_groups.metric: the local backend filters on the reward only (got {dynamic.metric!r})")
    env_config = spec_env_config(spec)
    watch.tools = tool_names(env_config.tools)  # the collapse warning names the env's tools

    policy = TransformersPolicy(model, device=device, max_new_tokens=spec.max_turn_tokens, temperature=spec.temperature, seed=args.seed)
    reference = copy.deepcopy(policy.model).eval().requires_grad_(False)  # the starting model, also on --resume
    checkpoint = run_dir / "checkpoint"
    if done_steps:
        from transformers import AutoModelForImageTextToText

        trained = AutoModelForImageTextToText.from_pretrained(checkpoint, dtype=policy.model.dtype, local_files_only=True)
        policy.model.load_state_dict(trained.state_dict())
    if actor.freeze_vision_tower:  # verl 0.9.1 declares this actor key; the local backend applies it
        print(f"vision encoder frozen: {freeze_vision_encoder(policy.model)} parameters", flush=True)
    optim = actor.optim
    trainable = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=spec.lr, betas=tuple(optim.betas), weight_decay=optim.weight_decay)
    if done_steps:
        optimizer.load_state_dict(torch.load(checkpoint / OPTIMIZER_STATE, weights_only=True))
    rng = np.random.default_rng(args.seed)
    every = probe_every(args)
    probes = load_probes(args, samples) if every else []
    write_run_manifest(run_dir, args, spec, every, len(probes), determinism)

    def run_probes(step: int) -> None:
        """The probe questions, greedily, one episode each, with the same seed and step (0) every time (same masks)."""
        sampling = policy.temperature
        policy.temperature = 0.0  # generation forks torch's RNG: probing leaves training's random stream as it was
        policy.model.eval()
        try:
            run_rollouts(probes, policy, group_size=1, env_config=env_config, out_dir=run_dir / "probes" / f"step_{step:04d}",
                         seed=args.seed, progress=False)  # fmt: skip
        finally:
            policy.temperature = sampling

    if probes and not done_steps:
        run_probes(0)
    resumed = f", resuming after step {done_steps}" if done_steps else ""
    print(f"local GRPO: {spec.reward}, G={spec.group_size}, {spec.batch_size} questions/step, {spec.steps} steps, {model} on {device}{resumed}", flush=True)

    metrics_file = (run_dir / "metrics.jsonl").open("a", encoding="utf-8")
    for step in range(1, spec.steps + 1):
        # The questions of each step come from one seeded stream: a resumed run draws those of the
        # finished steps again (without playing them), so it continues with the same questions.
        questions = [samples[i] for i in rng.choice(len(samples), size=min(spec.batch_size, len(samples)), replace=False)]
        if step <= done_steps:
            continue
        t0 = time.perf_counter()
        # Rollouts: G episodes per question with the current policy (+ the preset's perturbed groups), rewards by the preset.
        recorder = RecordingPolicy(policy)
        policy.model.eval()

        def play(asked: list) -> list:
            return run_rollouts(asked, recorder, group_size=spec.group_size, env_config=env_config,
                                out_dir=run_dir / "rollouts" / f"step_{step:04d}", seed=args.seed, step=step, progress=False,
                                norm_by_std=norm_by_std, initial_frames=spec.loop.get("initial_frames", ()),
                                look_on_share=spec.loop.get("look_on_share", 0.0),
                                look_on_starts=spec.loop.get("look_on_starts", ("two_misses",)))  # fmt: skip

        trajectories = play(questions)
        varied, generated = varied_groups(trajectories)
        zero_std_share, gen_batches = 1 - len(varied) / max(1, generated), 1  # of the first batch: what filtering saves
        if dynamic.enable:
            # DAPO's dynamic sampling (verl's algorithm.filter_groups): refill with groups whose rewards differ,
            # asking only as many new questions as are missing. Refills draw from their own stream, so the
            # step's first questions (and a resumed run's) are those of a run without it.
            refill = np.random.default_rng([args.seed, step])
            while len(varied) < len(questions) and (dynamic.max_num_gen_batches <= 0 or gen_batches < dynamic.max_num_gen_batches):
                asked = {t.sample_id for t in trajectories}
                rest = [s for s in samples if s.id not in asked]
                if not rest:
                    break
                more = [rest[i] for i in refill.choice(len(rest), size=min(len(questions) - len(varied), len(rest)), replace=False)]
                trajectories += play(more)
                gen_batches += 1
                varied, generated = varied_groups(trajectories)
            varied = varied[: len(questions)]
        batch = training_batch(trajectories, recorder, policy.renderer, groups=set(varied) if dynamic.enable else None,
                               reward_config=env_config.reward)  # fmt: skip
        t_rollout = time.perf_counter() - t0

        # Update: group-normalised advantages, clipped policy loss, KL to the reference (verl's core_algos).
        no_loss = batch.truncated if args.over_turn_mask else None  # Mini-o3: cut episodes train on nothing
        if batch.episodes:
            stats = grpo_update(policy.model, reference, optimizer, batch.episodes, batch.rewards, batch.group_ids, actor, device,
                                norm_by_std=norm_by_std, temperature=spec.temperature or 1.0, record_tokens=args.record_tokens,  # greedy (0) rollouts: plain log-probs
                                estimator=estimator, turn_rewards=batch.turn_rewards, turn_weight=turn_weight,
                                no_loss=no_loss,
                                vision_reuse=args.vision_reuse and bool(actor.freeze_vision_tower))  # fmt: skip
            update = {"loss": stats.loss, "pg_loss": stats.pg_loss, "kl": stats.kl, "grad_norm": stats.grad_norm,
                      "pg_clipfrac": stats.pg_clipfrac, "policy_tokens": stats.policy_tokens, "entropy": stats.entropy}  # fmt: skip
        else:
            stats = None
            update = {"skipped": 1.0}  # every episode failed: nothing to learn from
        write_step_record(run_dir / "rollouts" / f"step_{step:04d}", step_record(
            step, batch, stats, policy.tokenizer, env_config.reward.model_dump(mode="json"), norm_by_std=norm_by_std,
            record_tokens=args.record_tokens and stats is not None, no_loss=no_loss))
        groups = {"groups/zero_std_share": zero_std_share, "groups/generated": generated, "groups/gen_batches": gen_batches}
        # Tool use, its collapse watch and the look-on rate: of the episodes the policy started; those
        # that began with a forced start (--look-on-share) report their decision apart.
        origin = [t for t in trajectories if t.group.role == "origin"]
        own = [t for t in origin if not began_with_forced_start(t)]
        started = {f"look_on_start/{k}": v for k, v in look_on_rate(t for t in origin if began_with_forced_start(t)).items()}
        row = {"step": step, **rollout_metrics(trajectories), **tool_use_metrics(own, watch.tools), **look_on_rate(own), **started,
               **call_push(trajectories, env_config.reward.component_weights(), norm_by_std), **groups, **update, "episodes": len(batch.episodes),
               "time/rollout_s": t_rollout, "time/step_s": time.perf_counter() - t0}  # fmt: skip
        if str(device).startswith("cuda"):
            row["gpu/max_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
        metrics_file.write(json.dumps(row) + "\n")
        metrics_file.flush()
        shown = ("reward", "accuracy", "coverage", "calls", "crop_rate", "valid_format", "groups/zero_std_share", "loss", "kl", "entropy", "grad_norm")
        print(f"step {step:4d} " + " ".join(f"{k}={row[k]:.4g}" for k in shown if k in row) + f" ({row['time/step_s']:.1f}s)", flush=True)
        warning = watch.update(step, row.get("crop_rate"))
        if warning:
            print(f"run_csgrpo: warning: {warning}", file=sys.stderr, flush=True)
        if step % max(1, args.save_every) == 0 or step == spec.steps:
            save_checkpoint(checkpoint, policy, optimizer, step)
        if probes and (step % every == 0 or step == spec.steps):
            run_probes(step)
    metrics_file.close()

    print(f"checkpoint: {checkpoint}\nmetrics: {run_dir / 'metrics.jsonl'}\ntrajectories: videoseek view {run_dir / 'rollouts' / f'step_{spec.steps:04d}'}", flush=True)
    return 0


OPTIMIZER_STATE, TRAINER_STATE = "optimizer.pt", "trainer_state.json"


def write_run_manifest(run_dir: Path, args: argparse.Namespace, spec, every: int, n_probes: int, determinism: dict | None = None) -> None:
    """RUN/run.json, from either backend (`verl_plugin.config.write_spec_run_record`): the data, reward
    config and env of the run (the viewer's reward panel and play mode read it), and what else decides
    the result: decoding, hashes, version, commit, and here the probes and the command line."""
    from videoseek.agents.run_record import file_sha256
    from videoseek.training.verl_plugin.config import write_spec_run_record

    data = Path(args.data) if args.data else run_dir / "data" / "samples.jsonl"
    probe = Path(args.probe_data).resolve() if args.probe_data else None
    fields = {"probes": {"every": every, "n": n_probes, "data": str(probe) if probe else None},
              "probe_data_sha256": file_sha256(probe) if probe else None, "args": vars(args)}  # fmt: skip
    write_spec_run_record(spec, args.backend, fields, [data], determinism)


def write_step_record(step_dir: Path, record: tuple[dict, list[dict]]) -> None:
    """RUN/rollouts/step_NNNN/grpo.json (groups, advantages, token counts) and, when recorded, tokens.jsonl."""
    grpo, tokens = record
    step_dir.mkdir(parents=True, exist_ok=True)
    (step_dir / "grpo.json").write_text(json.dumps(grpo) + "\n", encoding="utf-8")
    if tokens:
        (step_dir / "tokens.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in tokens), encoding="utf-8")


def previous_steps(run_dir: Path, args: argparse.Namespace) -> int:
    """Steps an earlier run in `run_dir` finished (0 for a fresh folder); refuses to mix runs.

    Without `--resume` or `--overwrite`, a folder with metrics is an error: appending would write
    duplicate step lines and retrain from the starting model. `--overwrite` deletes the metrics,
    rollouts and checkpoint (the generated data stays); `--resume` continues from the checkpoint.
    """
    import shutil

    from videoseek.training.verl_plugin.config import ConfigError

    metrics = run_dir / "metrics.jsonl"
    if args.overwrite:
        metrics.unlink(missing_ok=True)
        for folder in ("rollouts", "checkpoint", "probes"):
            shutil.rmtree(run_dir / folder, ignore_errors=True)
        return 0
    if not metrics.is_file() or not metrics.read_text().strip():
        if args.resume:
            raise ConfigError(f"--resume: {run_dir} has no earlier run (no metrics.jsonl)")
        return 0
    state = run_dir / "checkpoint" / TRAINER_STATE
    if not args.resume:
        raise ConfigError(f"{run_dir} already holds a run ({metrics}): pass --resume to continue it or --overwrite to start again")
    if not state.is_file():
        raise ConfigError(f"--resume: {state} is missing (the run stopped before its first checkpoint; use --overwrite)")
    step = int(json.loads(state.read_text())["step"])
    # Steps after the checkpoint were lost with the process: drop their lines so none repeats.
    kept = [line for line in metrics.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    metrics.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return step


def save_checkpoint(checkpoint: Path, policy, optimizer, step: int) -> None:
    """Model, processor (tokenizer, chat template), optimizer state and step: what --resume needs."""
    import torch

    policy.model.save_pretrained(checkpoint)
    policy.processor.save_pretrained(checkpoint)
    torch.save(optimizer.state_dict(), checkpoint / OPTIMIZER_STATE)
    (checkpoint / TRAINER_STATE).write_text(json.dumps({"step": step}) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from videoseek.envs.sample import DataError
    from videoseek.training.verl_plugin.config import ConfigError

    args = parse_args(argv)
    backend = args.backend = args.backend or ("verl" if args.dry_run else default_backend())
    try:
        return run_verl(args) if backend == "verl" or args.dry_run else run_local(args)
    except (ConfigError, DataError, FileNotFoundError) as exc:
        print(f"run_csgrpo: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

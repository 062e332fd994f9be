"""Composing and validating verl's hydra config for a VideoSeek run (what `--dry-run` checks).

verl's trainer reads `verl/trainer/config/ppo_trainer.yaml` through hydra; a run is that file plus
command-line overrides. `verl_overrides` turns a `TrainSpec` into those overrides (vLLM rollout,
the VideoSeek agent loop, the reward function, the `videoseek_grpo` estimator, batch and length
settings, GPUs); `compose` applies them with hydra's own `compose` API, so an override whose key
does not exist in the installed verl fails exactly as `python -m verl.trainer.main_ppo` would;
`validate` then runs verl's own `validate_config` and checks that every class and function the
config names imports. Nothing here starts Ray, a GPU or a model.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from videoseek.training.verl_plugin.records import AGENT_NAME

REWARD_FN_PATH = "pkg://videoseek.training.verl_plugin.reward_fn"
REWARD_FN_NAME = "compute_score"
AGENT_LOOP_TARGET = "videoseek.training.verl_plugin.agent_loop.VideoSeekAgentLoop"
CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"
_PLAIN = re.compile(r"^[A-Za-z0-9_./\-+]+$")


class ConfigError(ValueError):
    """A config that verl would reject or that names something that does not import; one line."""


@dataclass
class TrainSpec:
    """Everything a VideoSeek training run needs, independent of the backend."""

    model: str
    train_files: list[str]
    val_files: list[str]
    out: str
    reward: str = "csgrpo"
    reward_params: dict[str, Any] = field(default_factory=dict)  # RewardConfig fields beyond the preset, e.g. {"clue_seek": {"paid_if_correct": True}}
    group_size: int = 4
    steps: int = 2
    batch_size: int = 2
    n_gpus: int = 1
    nnodes: int = 1
    prompt_length: int = 4096
    response_length: int = 2048
    max_turn_tokens: int = 512
    lr: float = 1e-6
    kl_coef: float = 0.01
    temperature: float = 1.0
    seed: int = 0  # with the step, decides episode seeds and mask patterns (agents.groups) and verl's data order
    env: dict[str, Any] = field(default_factory=dict)
    loop: dict[str, Any] = field(default_factory=dict)  # extra VideoSeekAgentLoop options
    overrides: dict[str, Any] = field(default_factory=dict)  # dotted verl keys from a ready config / CLI

    @property
    def run_dir(self) -> Path:
        return Path(self.out).resolve()


# ---- ready configs -----------------------------------------------------------------------------
def list_ready_configs() -> list[str]:
    """Names of the checked-in training configs under training/configs (without .yaml), agent_loop excluded
    (tool configs for verl's ToolAgentLoop live in training/configs/tools/)."""
    return sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml") if p.stem != "agent_loop")


def load_ready_config(name_or_path: str) -> dict[str, Any]:
    """A ready config by name (training/configs/NAME.yaml) or path; ConfigError if absent or not a mapping."""
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIGS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(f"{name_or_path}: no such config (ready configs: {', '.join(list_ready_configs())})")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a YAML mapping at the top level")
    return data


# ---- overrides ---------------------------------------------------------------------------------
def format_value(value: Any) -> str:
    """A Python value in hydra's override grammar (quoted where the grammar needs it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _PLAIN.match(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def format_override(key: str, value: Any) -> str:
    return f"{key}={format_value(value)}"


def agent_loop_entries(spec: TrainSpec) -> list[dict[str, Any]]:
    """The agent-loop YAML verl loads (`rollout.agent.agent_loop_config_path`); extra keys become kwargs."""
    options = {"reward": {"preset": spec.reward, **spec.reward_params}, "env": dict(spec.env), "max_turn_tokens": spec.max_turn_tokens, "seed": spec.seed, **spec.loop}
    return [{"name": AGENT_NAME, "_target_": AGENT_LOOP_TARGET, "videoseek": options}]


def write_agent_loop_yaml(spec: TrainSpec) -> Path:
    path = spec.run_dir / "agent_loop.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(agent_loop_entries(spec), sort_keys=False), encoding="utf-8")
    return path


def spec_env_config(spec: TrainSpec) -> Any:
    """The `EnvConfig` every episode of the run plays: the spec's env fields and its reward config."""
    from videoseek.envs.env import EnvConfig
    from videoseek.rewards import RewardConfig

    return EnvConfig(**spec.env, reward=RewardConfig(preset=spec.reward, **spec.reward_params))


def write_spec_run_record(spec: TrainSpec, backend: str, fields: dict[str, Any], data: list[str | os.PathLike[str]],
                          determinism: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """RUN/run.json of a training run on either backend (`videoseek.agents.run_record`): the env and
    reward config, the policy (the starting model), group and batch sizes, decoding and hashes."""
    from videoseek.agents.run_record import run_record, write_run_record

    head = {"backend": backend, "group_size": spec.group_size, "batch_size": spec.batch_size, "steps": spec.steps}
    decoding = {"seed": spec.seed, "temperature": spec.temperature, "top_p": 1.0, "top_k": None, "max_new_tokens": spec.max_turn_tokens}
    record = run_record("grpo", {**head, **fields, "determinism": determinism}, data=list(data), env=spec_env_config(spec),
                        policy=f"hf:{spec.model}", seed=spec.seed, model=spec.model, decoding=decoding)  # fmt: skip
    return write_run_record(spec.run_dir, record)


def verl_overrides(spec: TrainSpec, agent_loop_path: str | os.PathLike[str]) -> list[str]:
    """The hydra overrides for `verl.trainer.main_ppo` (ready-config and CLI overrides applied last)."""
    run = spec.run_dir
    # Every rollout of a batch is one optimizer mini-batch: GRPO's on-policy setting.
    values: dict[str, Any] = {
        "algorithm.adv_estimator": "videoseek_grpo",
        "algorithm.use_kl_in_reward": False,
        "algorithm.norm_adv_by_std_in_grpo": True,
        "critic.enable": False,
        "data.train_files": [str(Path(f).resolve()) for f in spec.train_files],
        "data.val_files": [str(Path(f).resolve()) for f in spec.val_files],
        "data.train_batch_size": spec.batch_size,
        "data.max_prompt_length": spec.prompt_length,
        "data.max_response_length": spec.response_length,
        "data.filter_overlong_prompts": False,
        "data.truncation": "error",
        "data.seed": spec.seed,  # the order verl's sampler draws prompts in
        "data.video_key": "videos",
        "data.return_raw_chat": True,
        "actor_rollout_ref.model.path": spec.model,
        "actor_rollout_ref.model.use_remove_padding": True,
        "actor_rollout_ref.model.enable_gradient_checkpointing": True,
        "actor_rollout_ref.actor.optim.lr": spec.lr,
        "actor_rollout_ref.actor.ppo_mini_batch_size": spec.batch_size,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 1,
        "actor_rollout_ref.actor.use_kl_loss": spec.kl_coef > 0,
        "actor_rollout_ref.actor.kl_loss_coef": spec.kl_coef,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff": 0,
        "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 1,
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.mode": "async",
        "actor_rollout_ref.rollout.n": spec.group_size,
        "actor_rollout_ref.rollout.temperature": spec.temperature,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 1,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "actor_rollout_ref.rollout.multi_turn.enable": True,
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(Path(agent_loop_path).resolve()),
        "actor_rollout_ref.rollout.agent.default_agent_loop": AGENT_NAME,
        "reward.custom_reward_function.path": REWARD_FN_PATH,
        "reward.custom_reward_function.name": REWARD_FN_NAME,
        "trainer.n_gpus_per_node": spec.n_gpus,
        "trainer.nnodes": spec.nnodes,
        "trainer.total_training_steps": spec.steps,
        "trainer.logger": ["console"],
        "trainer.project_name": "videoseek",
        "trainer.experiment_name": f"{spec.reward}-{run.name}",
        "trainer.default_local_dir": str(run / "checkpoints"),
        "trainer.rollout_data_dir": str(run / "rollouts"),
        "trainer.val_before_train": False,
        "trainer.test_freq": -1,
        "trainer.save_freq": spec.steps,
        "trainer.critic_warmup": 0,
        # v1 sync trainer: a prompt whose every session raised (e.g. its video stopped decoding at
        # reset) has no trajectory, and verl's replay buffer raises RuntimeError for it unless failed
        # groups are replaced by fresh prompts (verl then fetches prompts one at a time; docs/training.md).
        "trainer.v1.sampler.sync_refill_failed_groups": True,
    }
    values.update(spec.overrides)
    return [format_override(k, v) for k, v in values.items()]


# ---- compose & validate ------------------------------------------------------------------------
def verl_config_dir() -> str:
    import verl

    return os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def compose(overrides: list[str], config_name: str = "ppo_trainer"):
    """verl's config with `overrides` applied by hydra; ConfigError (one line) for an unknown key or bad value."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=verl_config_dir(), version_base=None):
            return hydra_compose(config_name=config_name, overrides=list(overrides))
    except Exception as exc:  # noqa: BLE001 - hydra raises several types; the first line names the override
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"verl config: {first}") from None


def _import_target(target: str) -> Any:
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {target}: {exc}") from None


def validate(cfg, check_data: bool = True) -> list[str]:
    """Check `cfg` the way verl will use it; returns warnings, raises ConfigError on the first problem.

    - verl's `validate_config` (batch sizes, micro batches, actor settings);
    - the rollout and actor sections convert to verl's dataclasses;
    - the advantage estimator is registered; the reward function loads through verl's loader;
    - every agent loop in `agent_loop_config_path` imports, subclasses `AgentLoopBase` and accepts
      its options;
    - the legacy trainer (`trainer.use_v1=false`) is refused where it would drop rewards: group
      presets (it splits a group across workers) and turn-level credit (it keeps no turn rewards);
    - the data files exist (and, if the model path is a local folder, verl's `RLHFDataset`
      reads the first row with the model's own tokenizer and processor).
    """
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from videoseek.training.verl_plugin.estimators import TURN_ESTIMATOR_NAME

    warnings: list[str] = []
    try:
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    except (AssertionError, ValueError, TypeError) as exc:
        raise ConfigError(f"verl rejects the config: {str(exc).strip().splitlines()[0]}") from None
    try:
        get_adv_estimator_fn(cfg.algorithm.adv_estimator)
    except ValueError as exc:
        raise ConfigError(f"algorithm.adv_estimator: {exc}") from None
    try:
        if get_custom_reward_fn(cfg) is None:
            raise ConfigError("reward.custom_reward_function.path is not set")
    except (ImportError, AttributeError, FileNotFoundError, RuntimeError) as exc:
        raise ConfigError(f"reward.custom_reward_function: {exc}") from None

    loop_path = cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path
    loop_options = _validate_agent_loops(str(loop_path)) if loop_path else []
    if not cfg.trainer.get("use_v1", False):
        if cfg.algorithm.adv_estimator == TURN_ESTIMATOR_NAME:
            # the legacy worker rebuilds rm_scores from reward_score alone, so the turn rewards
            # TurnRewardOutput.as_dict places (v1's agent_loop_tq path) would silently vanish
            raise ConfigError(
                f"trainer.use_v1=false: verl's legacy AgentLoopWorker keeps only the episode reward, "
                f"but algorithm.adv_estimator={TURN_ESTIMATOR_NAME} reads each turn's reward; use the v1 trainer"
            )
        for options in loop_options:
            kinds = options.reward.group_kinds()
            if kinds:
                raise ConfigError(
                    f"trainer.use_v1=false: verl's legacy AgentLoopManager splits a question's rollouts across workers, "
                    f"but the {options.reward.preset} preset's group reward ({', '.join(kinds)}) needs the whole group in one; use the v1 trainer"
                )
    if cfg.actor_rollout_ref.rollout.agent.default_agent_loop != AGENT_NAME:
        warnings.append(f"rollout.agent.default_agent_loop is {cfg.actor_rollout_ref.rollout.agent.default_agent_loop!r}")

    for key in ("train_files", "val_files"):
        for f in OmegaConf.to_container(cfg.data[key]) if not isinstance(cfg.data[key], str) else [cfg.data[key]]:
            if not Path(f).is_file():
                raise ConfigError(f"data.{key}: {f} does not exist (write it with `videoseek export-verl`)")
    _check_train_rows(cfg)
    if check_data and Path(str(cfg.actor_rollout_ref.model.path)).is_dir():
        _read_first_row(cfg)

    for module, what in (("vllm", "the vLLM rollout"), ("transfer_queue", "verl's v1 trainer (trainer.use_v1)")):
        needed = module == "vllm" or cfg.trainer.get("use_v1", False)
        if needed and importlib.util.find_spec(module) is None:
            warnings.append(f"{module} is not installed: {what} needs it on the GPU machine")
    return warnings


def _validate_agent_loops(path: str) -> list[Any]:
    """Check every entry of the agent-loop YAML; returns the VideoSeek loops' validated options."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase
    from verl.utils.import_utils import resolve_config_path

    try:
        entries = OmegaConf.to_container(OmegaConf.load(resolve_config_path(path)))
    except (OSError, FileNotFoundError) as exc:
        raise ConfigError(f"rollout.agent.agent_loop_config_path: {exc}") from None
    options = []
    for k, entry in enumerate(entries):
        if "name" not in entry or "_target_" not in entry:
            raise ConfigError(f"{path}: entry {k} needs `name` and `_target_`")
        cls = _import_target(entry["_target_"])
        if not (isinstance(cls, type) and issubclass(cls, AgentLoopBase)):
            raise ConfigError(f"{path}: {entry['_target_']} is not an AgentLoopBase")
        check = getattr(cls, "check_options", None)
        if check is not None:
            try:
                options.append(check(entry.get("videoseek") or {}))
            except ValueError as exc:
                raise ConfigError(f"{path}: entry {entry['name']!r}: {str(exc).splitlines()[0]}") from None
    return options


def _check_train_rows(cfg) -> None:
    """Refuse a training set smaller than one batch: verl's v1 trainer sets `steps_per_epoch =
    rows // data.train_batch_size`, which is then 0 (no full batch; its epoch arithmetic divides by it)."""
    files = [cfg.data.train_files] if isinstance(cfg.data.train_files, str) else list(cfg.data.train_files)
    if not all(str(f).endswith(".parquet") for f in files):
        return
    import pyarrow.parquet as pq

    rows = sum(pq.ParquetFile(str(f)).metadata.num_rows for f in files)
    if rows < cfg.data.train_batch_size:
        raise ConfigError(
            f"data.train_files: {rows} rows, fewer than data.train_batch_size={cfg.data.train_batch_size}: "
            f"verl would have no full batch to train on (use more samples or a smaller --batch-size)"
        )


def _read_first_row(cfg) -> None:
    from verl.utils import hf_processor, hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    model = str(cfg.actor_rollout_ref.model.path)
    tokenizer = hf_tokenizer(model)
    processor = hf_processor(model)
    try:
        dataset = RLHFDataset(list(cfg.data.train_files), tokenizer, cfg.data, processor, max_samples=1)
        row = dataset[0]
    except Exception as exc:  # noqa: BLE001 - report whatever verl's loader says, in one line
        raise ConfigError(f"data.train_files: verl's RLHFDataset cannot read the rows: {str(exc).splitlines()[0]}") from None
    if row.get("agent_name") != AGENT_NAME:
        raise ConfigError(f"data.train_files: rows name agent {row.get('agent_name')!r}, expected {AGENT_NAME!r}")


# ---- launching ---------------------------------------------------------------------------------
def main_ppo_command(overrides: list[str], python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "verl.trainer.main_ppo", *overrides]


def shell_line(command: list[str], head: int = 3) -> str:
    """The command for a shell: the program on the first line, one override per line after it."""
    quoted = [shlex.quote(c) for c in command]
    return " \\\n    ".join([" ".join(quoted[:head]), *quoted[head:]])

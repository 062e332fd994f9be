"""`TrajectoryRecorder`: what a TRL `GRPOTrainer` run played, written where the viewer reads a run.

A `transformers.TrainerCallback` and the sink of the episodes (`environment_factory(config,
recorder=...)` hands it every `VideoSeekTRLEnv` once its reward is known):

    RUN/run.json                               the run record (`agents.run_record`): env, reward config,
                                               tools, model, decoding and seed from the `GRPOConfig`
    RUN/rollouts/step_NNNN/trajectories.jsonl  the episodes scored in optimizer step NNNN (+ frames/)

the layout of the local backend, so `videoseek view RUN` shows TRL runs' curves, groups and
episodes as it shows ours. Each prompt's generations form one group (`GroupInfo.id`: the sample
id, as GRPO groups them); an episode's id is `<sample id>/g<k>`, k counting that sample's episodes
within the step.

```python
recorder = TrajectoryRecorder("runs/trl", config, data="samples.jsonl", model=model_dir)
trainer = GRPOTrainer(..., environment_factory=environment_factory(config, recorder=recorder), callbacks=[recorder])
```
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from videoseek.agents.run_record import run_record, write_run_record
from videoseek.envs.env import EnvConfig
from videoseek.envs.trajectory import GroupInfo, TrajectoryWriter

if TYPE_CHECKING:
    from videoseek.envs.env import VideoSeekEnv

STEP_DIR = "rollouts/step_{:04d}"


class TrajectoryRecorder(TrainerCallback):
    """Writes a TRL run's record and its episodes per optimizer step (see the module docstring).

    Args:
        run_dir: the run folder (usually `GRPOConfig.output_dir`).
        config: the `EnvConfig` of the run's episodes (the one given to `environment_factory`).
        data: the samples file(s) the dataset was made from (recorded with their SHA-256).
        model: the starting model's folder (recorded with a hash of its weights).
    """

    def __init__(self, run_dir: str | Path, config: EnvConfig, data: str | Path | list[str | Path] = (), model: str | Path | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.config = config
        self.data = [data] if isinstance(data, (str, Path)) else list(data)
        self.model = model
        self._pending: list[tuple[Any, dict]] = []
        self._lock = threading.Lock()  # TRL may step environments from a thread pool
        self._seen: dict[tuple[int, str], int] = {}
        self.written = 0

    # ---- the sink -------------------------------------------------------------------------------
    def add(self, env: VideoSeekEnv) -> None:
        """Keep a finished episode (its trajectory and frames) until the step ends."""
        with self._lock:
            self._pending.append((env.trajectory.model_copy(deep=True), dict(env.frames_by_turn)))

    def flush(self, step: int) -> int:
        """Write the kept episodes as step `step`'s; returns how many."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return 0
        writer = TrajectoryWriter(self.run_dir / STEP_DIR.format(step))
        for traj, frames in pending:
            k = self._seen.get((step, traj.sample_id), 0)
            self._seen[(step, traj.sample_id)] = k + 1
            traj.episode_id = f"{traj.sample_id}/g{k}"
            traj.group = GroupInfo(id=traj.sample_id, index=k)
            writer.write(traj, frames)
        self.written += len(pending)
        return len(pending)

    # ---- the callback ---------------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        decoding = {key: getattr(args, key, None) for key in ("temperature", "top_p", "top_k", "max_completion_length", "seed")}
        fields = {"backend": "trl", "group_size": getattr(args, "num_generations", None), "steps": getattr(args, "max_steps", None),
                  "batch_size": getattr(args, "per_device_train_batch_size", None), "learning_rate": getattr(args, "learning_rate", None)}  # fmt: skip
        policy = f"hf:{self.model}" if self.model is not None else None
        write_run_record(self.run_dir, run_record("trl-grpo", fields, data=self.data, env=self.config, policy=policy,
                                                  seed=getattr(args, "seed", None), model=self.model, decoding=decoding))  # fmt: skip

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # The episodes scored since the last step are the ones this optimizer step trained on
        # (TRL generates, scores, then steps; with generation_batch > one step, the episodes go
        # to the step in which they were scored).
        self.flush(int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.flush(int(state.global_step))

"""VideoSeek for TRL's `GRPOTrainer` (TRL 1.16; the optional `trl` extra: `pip install 'videoseek[trl]'`).

```python
from trl import GRPOConfig, GRPOTrainer
from videoseek.integrations.trl import add_response_schema, environment_factory, reward_funcs, samples_dataset

config = EnvConfig(reward="csgrpo", tools=["crop_video", "zoom"])
trainer = GRPOTrainer(
    model=model, processing_class=add_response_schema(processor), args=GRPOConfig(...),
    train_dataset=samples_dataset("samples.jsonl", config),  # the system prompt of config's tools
    environment_factory=environment_factory(config, recorder=recorder),  # one method per tool: TRL offers exactly those
    reward_funcs=reward_funcs,
    callbacks=[recorder],  # recorder = TrajectoryRecorder(output_dir, config, data=..., model=...): run.json and episodes for the viewer
)
```
`examples/trl_grpo.py` is a runnable script; docs/training.md ("Three ways to train") says what
the model sees on this path and what is lost when frames travel as images.
"""

from videoseek.integrations.trl.dataset import sample_from_row, sample_row, samples_dataset
from videoseek.integrations.trl.environment import VideoSeekTRLEnv, advertised_schema, environment_factory, observation_blocks
from videoseek.integrations.trl.recorder import TrajectoryRecorder
from videoseek.integrations.trl.rewards import reward_funcs, videoseek_reward
from videoseek.integrations.trl.schema import add_response_schema

__all__ = [
    "TrajectoryRecorder",
    "VideoSeekTRLEnv",
    "add_response_schema",
    "advertised_schema",
    "environment_factory",
    "observation_blocks",
    "reward_funcs",
    "sample_from_row",
    "sample_row",
    "samples_dataset",
    "videoseek_reward",
]

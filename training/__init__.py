"""verl integration and launchers for VideoSeek (`videoseek.training`).

Modules (none is imported here, so `import videoseek.training` stays light):

- `agent_loop`: `VideoSeekAgentLoop`, verl's multi-turn agent loop driving `VideoSeekEnv`.
- `group`: coordination of a group's sessions inside one verl worker (perturbed groups, group rewards).
- `reward_fn`: `compute_score` for `reward.custom_reward_function`.
- `estimators`: the `videoseek_grpo` advantage estimator registered in verl's `core_algos`.
- `plugin`: the `verl.plugins` entry point that registers both in every Ray worker.
- `records`: what crosses verl's process boundaries (sample JSON, episode summaries).
- `episode_dump`: the agent loop's episode dump beside verl's v1 rollout dump, for the viewer.
- `export`, `export_sft`: `videoseek export-verl` and `videoseek export-sft`.
- `verl_config`: composing and validating verl's hydra config (`--dry-run`).
- `local_grpo`, `local_rollout`: the one-process GRPO backend built on verl's `core_algos`.
- `run_csgrpo`: the launcher, `python training/run_csgrpo.py`.
"""

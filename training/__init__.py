"""Training for VideoSeek (`videoseek.training`), grouped by where the code runs.

Nothing is imported here, so `import videoseek.training` stays light.

- `verl_plugin/`: pieces that run inside verl's processes, registered through the `verl.plugins`
  entry point (`plugin`): `agent_loop` (`VideoSeekAgentLoop`, the async driver of
  `videoseek.agents.groups`), `group` (a group's sessions inside one worker), `reward_fn`
  (`compute_score`), `estimators` (`videoseek_grpo`), `records` (what crosses verl's process
  boundaries), `episode_dump` (the episodes' `Trajectory` records beside verl's rollout dump),
  `positions` (M-RoPE positions for the trainer), `config` (composing and validating verl's hydra
  config) and `sft` (verl's SFT trainer config).
- `local_backend/`: one-process training with transformers (CPU or one GPU): `grpo` (the GRPO
  update on verl's `core_algos`), `rollout` (episodes through `run_rollouts`, tokenised for the
  update), `sft`, `collapse` (tool-use metrics and the collapse warning), `determinism`.
- `exports/`: `verl_parquet` (`videoseek export-verl`) and `sft` (`videoseek export-sft`).
- Launchers, run as scripts: `run_csgrpo.py`, `run_sft.py`, `learn.py` (`make learn`),
  `gpu_probe.py` and `gpu_smoke.sh` (GPU checks); `configs/` holds the ready configs.
"""

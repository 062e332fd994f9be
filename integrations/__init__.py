"""Adapters that let other trainers drive VideoSeek episodes (package `videoseek.integrations`).

- `videoseek.integrations.trl`: an environment for TRL's `GRPOTrainer(environment_factory=...)`,
  its dataset and reward functions (the optional `trl` extra).

verl's stock `ToolAgentLoop` gets a tool instead (`videoseek.training.verl_plugin.tool_adapter.VideoSeekTool`, one adapter for any tool),
since verl loads tools by class path from a YAML file. Each adapter plays episodes through
`VideoSeekEnv` (frames, action parsing, evidence, scoring); none keeps a copy of its logic.
"""

"""Exports of samples for other trainers: verl's RL parquet (`videoseek export-verl`) and multi-turn SFT
conversations (`videoseek export-sft`)."""

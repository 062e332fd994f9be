"""The local backend: GRPO and SFT steps in one process with transformers (CPU or one GPU), the
tool-use collapse watch and deterministic settings; `run_csgrpo.py` and `run_sft.py` drive it."""

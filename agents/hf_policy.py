"""`TransformersPolicy`: a local Qwen2.5-VL / Qwen3-VL checkpoint as a VideoSeek policy (CPU or GPU).

One `act` call renders every live episode's conversation with the shared `ConversationRenderer`
(so prompts are token-identical to what vLLM and verl see), left-pads them into one batch and
runs a single `generate` call. A turn ends at `<|im_end|>`, at a stop string (`</tool_call>`,
`</answer>`: the protocol allows nothing after them) or at `max_new_tokens`. Special tokens other
than the turn's end are suppressed, so a policy can never write a vision placeholder or open a
new role. Each `PolicyOutput` carries the prompt ids, the generated ids (ending with
`<|im_end|>` when the model closed the turn itself) and, on request, their log-probabilities
under the model (temperature 1, before top-p), so training reuses the exact tokens.

Qwen2.5-VL positions: transformers 5.10 (the newest verl 0.9.1 allows) computes M-RoPE positions
differently from vLLM after a video and truncates clip rates; the model here uses
`videoseek.agents.rope.qwen2_5_vl_rope_index` instead, the rule vLLM samples with and verl
trains on (through `videoseek.training.verl_plugin.positions`), so all three agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from videoseek.agents.policy import PolicyInput, PolicyOutput, stable_seed
from videoseek.agents.prompting import CROP_VIDEO_TOOL, DEFAULT_STOP_STRINGS, ConversationRenderer, with_assistant_prefix
from videoseek.agents.rope import use_sampling_rope_index

# Keys of a rendered conversation that are per-token (padded) rather than per-vision-item (concatenated).
_TOKEN_KEYS = ("input_ids", "attention_mask", "mm_token_type_ids")
_VISION_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")


def resolve_dtype(dtype: Any, device: str) -> Any:
    """torch dtype from a name; "auto" is bfloat16 on CUDA and float32 elsewhere."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}: use auto, float32, bfloat16 or float16")
    return value


def collate_left_padded(rendered: Sequence[Mapping[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """One left-padded batch from rendered conversations; vision tensors concatenated in batch order."""
    import torch

    length = max(r["input_ids"].shape[1] for r in rendered)
    batch: dict[str, Any] = {}
    for key in _TOKEN_KEYS:
        fill = pad_token_id if key == "input_ids" else 0
        rows = []
        for r in rendered:
            row = r[key][0]
            rows.append(torch.cat([row.new_full((length - row.shape[0],), fill), row]))
        batch[key] = torch.stack(rows)
    for key in _VISION_KEYS:
        parts = [r[key] for r in rendered if key in r]
        if parts:
            batch[key] = torch.cat(parts, dim=0)
    return batch


def trim_turn(token_ids: Sequence[int], end_of_turn_id: int, stop_ids: set[int]) -> list[int]:
    """The generated ids of one turn: up to and including `<|im_end|>`, or up to any other stop / pad id."""
    out: list[int] = []
    for token in token_ids:
        if token == end_of_turn_id:
            out.append(token)
            break
        if token in stop_ids:
            break
        out.append(int(token))
    return out


def turn_token_sets(tokenizer: Any, eos_token_id: Any, end_of_turn_id: int) -> tuple[set[int], list[int]]:
    """(stop ids, suppressed ids) for generation.

    Stop ids end a turn without belonging to it: the checkpoint's other eos ids (`<|endoftext|>`)
    and the pad id. Suppressed ids are every other special token (vision placeholders, role
    markers), which a policy must never write.
    """
    eos = eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id]
    stop_ids = {int(t) for t in eos if t is not None}
    if tokenizer.pad_token_id is not None:
        stop_ids.add(int(tokenizer.pad_token_id))
    stop_ids.discard(end_of_turn_id)
    special = {int(i) for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    return stop_ids, sorted(special - stop_ids - {end_of_turn_id})


def open_checkpoint(
    model_path: str | Path, max_new_tokens: int, temperature: float, top_p: float, **renderer_kwargs: Any
) -> tuple[Path, Any, ConversationRenderer]:
    """Check the sampling settings, load a local checkpoint's processor and build its renderer
    (shared by the transformers and vLLM policies, so both render identically)."""
    from transformers import AutoProcessor

    path = Path(model_path).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no model at {path}: expected a checkpoint directory with config.json")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if temperature < 0 or not 0 < top_p <= 1:
        raise ValueError(f"need temperature >= 0 and 0 < top_p <= 1, got {temperature}, {top_p}")
    processor = AutoProcessor.from_pretrained(path, local_files_only=True)
    return path, processor, ConversationRenderer(processor, **renderer_kwargs)


class TransformersPolicy:
    """A Hugging Face Qwen-VL checkpoint directory as a `Policy` (batched generation across episodes).

    `temperature=0` decodes greedily. `mode` is "video" (each message's frames as one video) or
    "images" (one timestamp-labelled image per frame). `stop` lists strings that end a turn.
    `tools=False` renders prompts without the crop_video schema (the no-tool baseline, with
    `EnvConfig(tools=False)`: `videoseek rollout --no-tools`).
    `return_logprobs` keeps the raw logits of every step during generation (memory grows with
    batch x new tokens x vocabulary): fine for small models, off by default.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str = "cpu",
        dtype: Any = "auto",
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
        mode: str = "video",
        stop: Sequence[str] = DEFAULT_STOP_STRINGS,
        chat_template: str = "videoseek",
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        return_logprobs: bool = False,
        tools: bool = True,
        attn_implementation: str | None = None,
        name: str | None = None,
    ) -> None:
        from transformers import AutoModelForImageTextToText

        path, self.processor, self.renderer = open_checkpoint(
            model_path, max_new_tokens, temperature, top_p, mode=mode, chat_template=chat_template, min_pixels=min_pixels, max_pixels=max_pixels,
            tools=(CROP_VIDEO_TOOL,) if tools else (),
        )
        self.name = name or f"hf:{path.name}"
        self.device = device
        self.tokenizer = self.processor.tokenizer
        load_kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        self.model = AutoModelForImageTextToText.from_pretrained(
            path, dtype=resolve_dtype(dtype, device), local_files_only=True, **load_kwargs
        ).to(device)
        self.model.eval()
        use_sampling_rope_index(self.model)
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.seed = seed
        self.stop = tuple(stop)
        self.return_logprobs = return_logprobs
        self.end_of_turn_id = self.renderer.end_of_turn_id
        self.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end_of_turn_id
        self.stop_ids, self.suppressed_ids = turn_token_sets(self.tokenizer, self.model.generation_config.eos_token_id, self.end_of_turn_id)

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        """One assistant turn for every episode in `batch`, from one batched `generate` call."""
        if not batch:
            return []
        rendered = [
            with_assistant_prefix(self.renderer.render(item.messages, add_generation_prompt=True), self.tokenizer, item.prefix)
            for item in batch
        ]
        seed = stable_seed(self.seed, [(item.episode_id, item.turn) for item in batch])
        return self.generate(rendered, seed=seed)

    def _generation_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "eos_token_id": [self.end_of_turn_id, *sorted(self.stop_ids)],
            "pad_token_id": self.pad_token_id,
            "suppress_tokens": self.suppressed_ids or None,
            "return_dict_in_generate": True,
            "output_logits": self.return_logprobs,
        }
        if self.temperature > 0:
            kwargs.update(do_sample=True, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k or 0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if self.stop:
            kwargs.update(stop_strings=list(self.stop), tokenizer=self.tokenizer)
        return kwargs

    def generate(self, rendered: Sequence[Mapping[str, Any]], seed: int = 0) -> list[PolicyOutput]:
        """Generate one turn for each rendered conversation (ending in a generation prompt)."""
        import torch

        inputs = collate_left_padded(rendered, self.pad_token_id)
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        if "pixel_values" in inputs or "pixel_values_videos" in inputs:
            for key in ("pixel_values", "pixel_values_videos"):
                if key in inputs:
                    inputs[key] = inputs[key].to(self.model.dtype)
        devices = [torch.device(self.device)] if str(self.device).startswith("cuda") else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(seed)
            out = self.model.generate(**inputs, **self._generation_kwargs())
        prompt_length = inputs["input_ids"].shape[1]
        generated = out.sequences[:, prompt_length:].tolist()
        outputs = []
        for row, (r, ids) in enumerate(zip(rendered, generated)):
            token_ids = trim_turn(ids, self.end_of_turn_id, self.stop_ids)
            content = token_ids[:-1] if token_ids and token_ids[-1] == self.end_of_turn_id else token_ids
            text = self.tokenizer.decode(content, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            logprobs = None
            if self.return_logprobs:
                logprobs = [
                    float(torch.log_softmax(out.logits[step][row].float(), dim=-1)[token])
                    for step, token in enumerate(token_ids)
                ]
            outputs.append(PolicyOutput(text, r["input_ids"][0].tolist(), token_ids, logprobs))
        return outputs


def sequence_logprobs(model: Any, rendered: Mapping[str, Any]) -> list[Any]:
    """Teacher-forced log-probabilities of each assistant span's tokens (one float tensor per span).

    One forward pass over the rendered conversation (frames included); token t's log-probability
    comes from the logits at position t-1, as in training.
    """
    import torch

    inputs = {k: rendered[k] for k in _TOKEN_KEYS + _VISION_KEYS if k in rendered}
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in inputs.items()}
    for key in ("pixel_values", "pixel_values_videos"):
        if key in inputs:
            inputs[key] = inputs[key].to(model.dtype)
    with torch.inference_mode():
        logits = model(**inputs).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    ids = inputs["input_ids"][0]
    spans = []
    for start, end in rendered["assistant_spans"]:
        positions = torch.arange(start, end, device=device)
        spans.append(logp[positions - 1, ids[positions]].cpu())
    return spans

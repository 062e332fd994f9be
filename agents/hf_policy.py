"""`TransformersPolicy`: a local Qwen2.5-VL / Qwen3-VL checkpoint as a VideoSeek policy (CPU or GPU).

One `act` call renders every live episode's conversation with the shared `ConversationRenderer`
(so prompts are token-identical to what vLLM and verl see), left-pads them into one batch and
runs a single `generate` call; an episode the policy played last turn continues from that turn's
keys and values (`TurnCache`), so only its new messages are prefilled. A turn ends at
`<|im_end|>`, at a stop string (`</tool_call>`, `</answer>`: the protocol allows nothing after
them) or at `max_new_tokens`. Special tokens other
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from videoseek.agents.model_options import ModelPolicyOptions, split_options
from videoseek.agents.policy import PolicyInput, PolicyOutput, stable_seed
from videoseek.agents.prompting import ConversationRenderer, EpisodeRenders
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


def open_checkpoint(model_path: str | Path, options: ModelPolicyOptions) -> tuple[Path, Any, ConversationRenderer]:
    """Load a local checkpoint's processor and build its renderer from `options` (shared by the
    transformers and vLLM policies, so both render identically; the options checked themselves)."""
    from transformers import AutoProcessor

    path = Path(model_path).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no model at {path}: expected a checkpoint directory with config.json")
    processor = AutoProcessor.from_pretrained(path, local_files_only=True)
    return path, processor, ConversationRenderer(processor, **options.renderer_kwargs())


@dataclass
class TurnKV:
    """One episode's keys and values after a turn: those of `ids` (its prompt and the turn's
    tokens but the last, which generation never feeds back), per decoder layer (heads, len, dim)."""

    ids: list[int]
    layers: list[tuple[Any, Any]]


class TurnCache:
    """Keys and values kept between an episode's turns, so a turn prefills only its new tokens.

    Every turn's prompt is the last prompt, the turn's tokens (rendered verbatim from their ids),
    the tool's response and the next generation prompt: re-encoding it whole spends most of a
    turn's prefill on tokens the model has seen (the system prompt, the tool schema, every frame
    so far). vLLM's prefix caching avoids that on GPU; transformers has no cross-call cache for
    batched rows of different lengths, so this one is kept here.

    `lookup` returns an episode's `TurnKV` only when its ids are a prefix of the new prompt and
    end outside a vision run (anything else prefills whole). `continued_batch` lays the rows out
    as [pad | held tokens | pad | new tokens] with an attention mask that is 0 on both pads, the
    position ids of each row computed on its whole prompt by the model's own rope index (M-RoPE
    for the frames; the pads are never attended) and only the new frames' pixels. The positions
    and tokens are those of a whole prefill; the sums run over other shapes, so logits agree with
    it to float rounding (a test checks the tokens and log-probabilities).
    """

    def __init__(self, model: Any, video_token_id: int, image_token_id: int) -> None:
        self.model = model
        self.placeholder_of = {"video_grid_thw": video_token_id, "image_grid_thw": image_token_id}
        self.vision_token_ids = set(self.placeholder_of.values())
        self.merge = int(model.config.vision_config.spatial_merge_size)
        self._held: dict[str, TurnKV] = {}
        self._weights = self.weights_version()
        self.reused_tokens = self.prefilled_tokens = 0  # prompt tokens taken from the cache / computed

    def weights_version(self) -> int:
        """Changes whenever a parameter is written in place (an optimizer step, a loaded state):
        keys and values held from before a training step must not serve a turn after it."""
        return sum(p._version for p in self.model.parameters())

    def lookup(self, episode_ids: Sequence[str], prompts: Sequence[Any]) -> list[TurnKV | None]:
        """Each episode's held state for its prompt (ids, 1-D), or None ("" ids get None)."""
        if self._held and self.weights_version() != self._weights:  # once a batch: it walks the parameters
            self._held = {}
        return [self._usable(self._held.get(e) if e else None, p) for e, p in zip(episode_ids, prompts)]

    def _usable(self, held: TurnKV | None, prompt_ids: Any) -> TurnKV | None:
        if held is None or len(held.ids) >= prompt_ids.numel() or prompt_ids[: len(held.ids)].tolist() != held.ids:
            return None
        if held.ids[-1] in self.vision_token_ids or int(prompt_ids[len(held.ids)]) in self.vision_token_ids:
            return None  # a vision run cut in two: its frames could not be split
        return held

    def keep(self, states: Mapping[str, TurnKV | None]) -> None:
        """Hold these episodes' states for their next turn (and drop every other)."""
        self._held = {k: v for k, v in states.items() if v is not None}
        self._weights = self.weights_version()

    def row_state(self, cache: Any, row: int, spans: Sequence[tuple[int, int]], prompt_ids: list[int], token_ids: list[int]) -> TurnKV | None:
        """The row's keys and values of its prompt (`spans`: its columns, in order) and turn."""
        import torch

        if cache is None:
            return None
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        end = spans[-1][1]
        fed = min(len(token_ids), layers[0][0].shape[2] - end)  # the last sampled token was never fed
        columns = torch.cat([torch.arange(a, b) for a, b in spans] + [torch.arange(end, end + fed)]).to(layers[0][0].device)
        return TurnKV(prompt_ids + token_ids[:fed], [(k[row].index_select(1, columns), v[row].index_select(1, columns)) for k, v in layers])

    def _vision_split(self, rendered: Mapping[str, Any], held: int) -> dict[str, Any]:
        """The vision tensors of the frames after the first `held` tokens (whole items only)."""
        import torch

        ids = rendered["input_ids"][0]
        out = {}
        for pixels, grid_key, extra in (("pixel_values_videos", "video_grid_thw", "second_per_grid_ts"), ("pixel_values", "image_grid_thw", None)):
            if grid_key not in rendered:
                continue
            grid = rendered[grid_key]
            seen = int((ids[:held] == self.placeholder_of[grid_key]).sum())
            tokens = torch.cumsum(grid.prod(-1) // self.merge**2, 0)
            items = int((tokens <= seen).sum())
            if items and int(tokens[items - 1]) != seen or not items and seen:
                raise ValueError("the held tokens end inside a vision item")
            skip = int(grid[:items].prod(-1).sum())
            if items < grid.shape[0]:
                out[pixels] = rendered[pixels][skip:]
                out[grid_key] = grid[items:]
                if extra and extra in rendered:
                    out[extra] = rendered[extra][items:]
        return out

    def positions(self, rendered: Mapping[str, Any]) -> Any:
        """(4, L) position ids of a whole prompt as `generate` computes them: the text position,
        then the model's (t, h, w) rope index."""
        import torch

        ids = rendered["input_ids"]
        vision = {k: rendered[k] for k in ("image_grid_thw", "video_grid_thw", "second_per_grid_ts") if k in rendered}
        rope, _ = self.model.model.get_rope_index(ids, mm_token_type_ids=rendered["mm_token_type_ids"], attention_mask=torch.ones_like(ids), **vision)
        return torch.cat([torch.arange(ids.shape[1]).view(1, -1), rope[:, 0].to(torch.long)], dim=0)

    def continued_batch(self, rendered: Sequence[Mapping[str, Any]], held: Sequence[TurnKV], pad_token_id: int) -> tuple[dict[str, Any], list]:
        """Model inputs and a filled `DynamicCache` continuing each row from its `held` state;
        and each row's prompt columns, [(start, end)] in order."""
        import torch
        from transformers import DynamicCache

        cached = max(len(h.ids) for h in held)
        new = [r["input_ids"].shape[1] - len(h.ids) for r, h in zip(rendered, held)]
        width = cached + max(new)
        batch = len(rendered)
        input_ids = torch.full((batch, width), pad_token_id, dtype=torch.long)
        attention = torch.zeros((batch, width), dtype=torch.long)
        types = torch.zeros((batch, width), dtype=torch.long)
        position_ids = torch.zeros((4, batch, width), dtype=torch.long)
        layout, vision = [], []
        for i, (r, h, n) in enumerate(zip(rendered, held, new)):
            c = len(h.ids)
            spans = [(cached - c, cached), (width - n, width)]
            positions = self.positions(r)
            for (a, b), (x, y) in zip(spans, ((0, c), (c, c + n))):
                input_ids[i, a:b] = r["input_ids"][0, x:y]
                attention[i, a:b] = 1
                types[i, a:b] = r["mm_token_type_ids"][0, x:y]
                position_ids[:, i, a:b] = positions[:, x:y]
            layout.append(spans)
            vision.append(self._vision_split(r, c))
            self.reused_tokens += c
            self.prefilled_tokens += n
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention, "mm_token_type_ids": types, "position_ids": position_ids}
        for key in _VISION_KEYS:
            parts = [v[key] for v in vision if key in v]
            if parts:
                inputs[key] = torch.cat(parts, dim=0)
        layers = []
        for layer in range(len(held[0].layers)):
            k0, v0 = held[0].layers[layer]
            keys = k0.new_zeros((batch, k0.shape[0], cached, k0.shape[2]))
            values = v0.new_zeros((batch, v0.shape[0], cached, v0.shape[2]))
            for i, h in enumerate(held):
                k, v = h.layers[layer]
                keys[i, :, cached - k.shape[1] :] = k
                values[i, :, cached - v.shape[1] :] = v
            layers.append((keys, values))
        inputs["past_key_values"] = DynamicCache(ddp_cache_data=layers, config=self.model.config)
        return inputs, layout


class TransformersPolicy:
    """A Hugging Face Qwen-VL checkpoint directory as a `Policy` (batched generation across episodes).

    `options` (`ModelPolicyOptions`, or its fields as keywords: `max_new_tokens`, `temperature`
    (0: greedy), `top_p`, `top_k`, `seed`, `stop`, `mode` "video" | "images", `chat_template`,
    `min_pixels`, `max_pixels`, `tools`, `name`) are the ones the vLLM policy takes too. The tool
    schemas in the prompt are the env's (`PolicyInput.tools`, from `info["tools"]`); `tools` is the
    list until an input says.
    `return_logprobs` keeps the raw logits of every step during generation (memory grows with
    batch x new tokens x vocabulary): fine for small models, off by default.
    `reuse_kv` (default on) keeps each live episode's keys and values between its turns
    (`TurnCache`): a turn prefills only its new messages. Measured side by side on the 2-core CPU
    machine (bench/bench_turn_cache.py, best of two), a greedy evaluation of `make learn`'s SFT
    checkpoint on 192 questions took 15.1 s instead of 27.1 (1.79x), the same tokens. It holds one
    batch of key/value caches between turns (what `generate` holds during one); `reuse_kv=False`
    prefills every turn whole.
    """

    def __init__(
        self,
        model_path: str | Path,
        options: ModelPolicyOptions | None = None,
        *,
        device: str = "cpu",
        dtype: Any = "auto",
        return_logprobs: bool = False,
        attn_implementation: str | None = None,
        reuse_kv: bool = True,
        **option_fields: Any,
    ) -> None:
        from transformers import AutoModelForImageTextToText

        self.options, _ = split_options(ModelPolicyOptions, options, option_fields, type(self).__name__)
        path, self.processor, self.renderer = open_checkpoint(model_path, self.options)
        self.renders = EpisodeRenders(self.renderer)  # each live episode rendered once, extended per turn
        self.name = self.options.name or f"hf:{path.name}"
        self.device = device
        self.tokenizer = self.processor.tokenizer
        load_kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        self.model = AutoModelForImageTextToText.from_pretrained(
            path, dtype=resolve_dtype(dtype, device), local_files_only=True, **load_kwargs
        ).to(device)
        self.model.eval()
        use_sampling_rope_index(self.model)
        self.options.set_on(self)  # max_new_tokens, temperature, top_p, top_k, seed, stop as plain attributes
        self._stop: Any = None  # the criteria, built at the first turn
        self.return_logprobs = return_logprobs
        self.end_of_turn_id = self.renderer.end_of_turn_id
        self.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end_of_turn_id
        self.stop_ids, self.suppressed_ids = turn_token_sets(self.tokenizer, self.model.generation_config.eos_token_id, self.end_of_turn_id)
        self.turn_cache = TurnCache(self.model, self.renderer.video_token_id, self.renderer.image_token_id) if reuse_kv else None

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        """One assistant turn for every episode in `batch` (see the class docstring: `reuse_kv`)."""
        if not batch:
            return []
        rendered = self.renders.render_inputs(batch)
        seed = stable_seed(self.seed, [(item.episode_id, item.turn) for item in batch])
        if self.turn_cache is None:
            return self.generate(rendered, seed=seed)[0]
        # An episode whose last turn this policy generated continues from that turn's keys and
        # values: its prefill covers only the new messages. The others (a first turn, a prefix, a
        # history that changed) prefill whole in a call of their own, as a batch prefills as far
        # as its longest row; the second call of such a split samples with a seed of its own.
        ids = [item.episode_id if item.episode_id and not item.prefix else "" for item in batch]
        ids = [e if e and ids.count(e) == 1 else "" for e in ids]
        held = self.turn_cache.lookup(ids, [r["input_ids"][0] for r in rendered])
        outputs: list[Any] = [None] * len(batch)
        kept: dict[str, TurnKV | None] = {}
        groups = [[i for i, h in enumerate(held) if h is None], [i for i, h in enumerate(held) if h is not None]]
        for continued, rows in enumerate(groups):
            if not rows:
                continue
            part, states = self.generate([rendered[i] for i in rows], seed=stable_seed(seed, "continued") if continued and groups[0] else seed,
                                         held=[held[i] for i in rows] if continued else None)  # fmt: skip
            for i, out, state in zip(rows, part, states):
                outputs[i] = out
                if ids[i]:
                    kept[ids[i]] = state
        self.turn_cache.keep(kept)
        return outputs

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
            kwargs.update(stopping_criteria=self._stop_criteria())
        return kwargs

    def _stop_criteria(self) -> Any:
        """The stop strings' criteria, built once: transformers' own cache of their tables misses on
        every `generate` (its key holds `get_vocab()`'s order, which the fast tokenizer does not keep),
        and rebuilding them walks the whole vocabulary (measured: 18 ms a turn on the tiny tokenizer)."""
        from transformers import StopStringCriteria, StoppingCriteriaList

        if self._stop is None:
            self._stop = StoppingCriteriaList([StopStringCriteria(self.tokenizer, list(self.stop))])
        return self._stop

    def generate(
        self, rendered: Sequence[Mapping[str, Any]], seed: int = 0, held: Sequence[TurnKV] | None = None
    ) -> tuple[list[PolicyOutput], list[TurnKV | None]]:
        """Generate one turn for each rendered conversation (ending in a generation prompt).

        `held` (one per row) continues each row from the keys and values of its first tokens
        (`TurnCache`). Returns the outputs and, with a `TurnCache`, each row's keys and values
        for its next turn.
        """
        import torch

        if held is None:
            inputs = collate_left_padded(rendered, self.pad_token_id)
            width = inputs["input_ids"].shape[1]
            layout = [[(width - r["input_ids"].shape[1], width)] for r in rendered]
            if self.turn_cache is not None:
                self.turn_cache.prefilled_tokens += sum(r["input_ids"].shape[1] for r in rendered)
        else:
            inputs, layout = self.turn_cache.continued_batch(rendered, held, self.pad_token_id)
        inputs = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in inputs.items()}
        for key in ("pixel_values", "pixel_values_videos"):
            if key in inputs:
                inputs[key] = inputs[key].to(self.model.dtype)
        devices = [torch.device(self.device)] if str(self.device).startswith("cuda") else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(seed)
            out = self.model.generate(**inputs, **self._generation_kwargs())
        prompt_length = inputs["input_ids"].shape[1]
        generated = out.sequences[:, prompt_length:].tolist()
        outputs, states = [], []
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
            prompt_ids = r["input_ids"][0].tolist()
            outputs.append(PolicyOutput(text, prompt_ids, token_ids, logprobs))
            if self.turn_cache is not None:
                states.append(self.turn_cache.row_state(out.past_key_values, row, layout[row], prompt_ids, token_ids))
        return outputs, states or [None] * len(outputs)


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

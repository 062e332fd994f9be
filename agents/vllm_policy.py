"""`VLLMPolicy`: vLLM's offline engine as a VideoSeek policy, with the same interface as `TransformersPolicy`.

vLLM is imported only when a `VLLMPolicy` is built, so the package works without it (official
vLLM cannot share an environment with verl 0.9.1's transformers pin; install it where you train,
e.g. verl's stack: `pip install 'verl[vllm]==0.9.1'`).

Each prompt is the `ConversationRenderer`'s token ids with every image's and video's expansion
replaced by one placeholder (`families.vllm_prompt_ids`, as the verl agent loop sends them), plus
the raw frames as `multi_modal_data` (`{"video": [(frames, metadata)]}` or `{"image": [frame, ...]}`):
vLLM (0.31 seen here) always re-expands each placeholder itself, so an already expanded prompt
would grow (599 -> 610 tokens for one Qwen2.5-VL clip; 736 -> 773 for the probe's Qwen3-VL
conversation, whose processor writes `<t seconds>` and vision markers per frame pair, which vLLM
writes again). vLLM's expansion of the placeholders equals the renderer's ids for both families,
so vLLM, transformers and verl see the same tokens (`PolicyOutput.prompt_token_ids` are the
renderer's; a vLLM whose expanded prompt differs raises). The same stop rules apply (`<|im_end|>`,
`</tool_call>`, `</answer>`), special tokens other than the turn's end get a -100 logit bias
(vLLM's floor), and every request has its own seed derived from the episode id and turn, so an
episode samples the same tokens whatever batch it runs in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from videoseek.agents.families import vllm_prompt_ids
from videoseek.agents.hf_policy import open_checkpoint, trim_turn, turn_token_sets
from videoseek.agents.model_options import ModelPolicyOptions, split_options
from videoseek.agents.policy import PolicyInput, PolicyOutput, stable_seed
from videoseek.agents.prompting import EpisodeRenders

INSTALL_HINT = "VLLMPolicy needs vLLM: pip install 'verl[vllm]==0.9.1' (verl's vLLM stack), or a vllm matching your torch"


def import_vllm() -> Any:
    """The `vllm` module, or an ImportError that says how to get it."""
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from exc
    return vllm


def vllm_prompt(rendered: Mapping[str, Any], mm_processor_kwargs: Mapping[str, Any], processor: Any) -> dict[str, Any]:
    """A vLLM `TokensPrompt` dict for one rendered conversation: one placeholder per image / video
    (`families.vllm_prompt_ids`), which vLLM expands back into the rendered ids."""
    collapsed = vllm_prompt_ids(rendered["input_ids"][0].tolist(), processor, rendered.get("video_grid_thw"))
    prompt: dict[str, Any] = {"prompt_token_ids": collapsed}
    if rendered["multi_modal_data"]:
        prompt["multi_modal_data"] = rendered["multi_modal_data"]
        prompt["mm_processor_kwargs"] = dict(mm_processor_kwargs)
    return prompt


class VLLMPolicy:
    """A Qwen-VL checkpoint served by `vllm.LLM` as a `Policy` (see the module docstring).

    `options` are `TransformersPolicy`'s (`ModelPolicyOptions`, or its fields as keywords).
    `limit_mm_per_prompt` defaults to what the env's budgets allow (videos: one per message; images:
    one per frame). Other keyword arguments go to `vllm.LLM` (e.g. `gpu_memory_utilization`,
    `max_model_len`, `enforce_eager`). The tool schemas in the prompt are the env's
    (`PolicyInput.tools`); `tools` (True: the default tools, False: none, or names) is the list until an input says.
    """

    def __init__(
        self,
        model_path: str | Path,
        options: ModelPolicyOptions | None = None,
        *,
        return_logprobs: bool = True,
        limit_mm_per_prompt: Mapping[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        self.options, llm_kwargs = split_options(ModelPolicyOptions, options, kwargs, type(self).__name__, extra=None)
        vllm = import_vllm()
        from transformers import GenerationConfig

        mode = self.options.mode
        path, self.processor, self.renderer = open_checkpoint(model_path, self.options)
        self.renders = EpisodeRenders(self.renderer)  # each live episode rendered once, extended per turn
        self.name = self.options.name or f"vllm:{path.name}"
        self.tokenizer = self.processor.tokenizer
        self.end_of_turn_id = self.renderer.end_of_turn_id
        try:
            eos_token_id = GenerationConfig.from_pretrained(path, local_files_only=True).eos_token_id
        except OSError:  # no generation_config.json: the tokenizer's eos is the only end
            eos_token_id = self.tokenizer.eos_token_id
        self.stop_ids, self.suppressed_ids = turn_token_sets(self.tokenizer, eos_token_id, self.end_of_turn_id)
        self.mm_processor_kwargs: dict[str, Any] = {"do_sample_frames": False} if mode == "video" else {}
        self.mm_processor_kwargs.update(self.renderer.vision_kwargs)
        if limit_mm_per_prompt is None:
            limit_mm_per_prompt = {"video": 16, "image": 0} if mode == "video" else {"image": 128, "video": 0}
        self.llm = vllm.LLM(model=str(path), seed=self.options.seed, limit_mm_per_prompt=dict(limit_mm_per_prompt), **llm_kwargs)
        self._sampling_params = vllm.SamplingParams
        self.options.set_on(self)  # max_new_tokens, temperature, top_p, top_k, seed, stop as plain attributes
        self.return_logprobs = return_logprobs

    def sampling_params(self, seed: int) -> Any:
        """vLLM SamplingParams for one request."""
        return self._sampling_params(
            n=1,
            max_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k if self.top_k else -1,
            seed=seed,
            stop=list(self.stop) or None,
            stop_token_ids=[self.end_of_turn_id, *sorted(self.stop_ids)],
            include_stop_str_in_output=True,
            skip_special_tokens=False,
            logprobs=0 if self.return_logprobs else None,
            logit_bias={t: -100.0 for t in self.suppressed_ids} or None,
        )

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        """One assistant turn for every episode in `batch`, from one `LLM.generate` call."""
        if not batch:
            return []
        rendered = self.renders.render_inputs(batch)
        prompts = [vllm_prompt(r, self.mm_processor_kwargs, self.processor) for r in rendered]
        params = [self.sampling_params(stable_seed(self.seed, item.episode_id, item.turn)) for item in batch]
        results = self.llm.generate(prompts, params, use_tqdm=False)
        for item, r, result in zip(batch, rendered, results):
            served = getattr(result, "prompt_token_ids", None)  # the prompt after vLLM's own expansion
            if served is not None and list(served) != r["input_ids"][0].tolist():
                raise RuntimeError(
                    f"episode {item.episode_id}: vLLM expanded the prompt to {len(served)} tokens, the renderer has "
                    f"{r['input_ids'].shape[1]}: sampling would see other tokens than training (families.vllm_prompt_ids)"
                )
        return [self._output(r, result.outputs[0]) for r, result in zip(rendered, results)]

    def _output(self, rendered: Mapping[str, Any], completion: Any) -> PolicyOutput:
        token_ids = trim_turn(list(completion.token_ids), self.end_of_turn_id, self.stop_ids)
        content = token_ids[:-1] if token_ids and token_ids[-1] == self.end_of_turn_id else token_ids
        # The text is decoded from the ids (not vLLM's stop-trimmed text) so the two always agree.
        text = self.tokenizer.decode(content, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        logprobs = None
        if self.return_logprobs and completion.logprobs is not None:
            logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs, token_ids)]
        return PolicyOutput(text, rendered["input_ids"][0].tolist(), token_ids, logprobs)

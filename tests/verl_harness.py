"""verl's agent-loop path on CPU: real verl classes, with only the CUDA/cluster pieces emulated.

What runs for real: `RLHFDataset` / `collate_fn` on `export-verl` rows, verl's `LLMServerClient`
(the server manager agent loops call), `AgentLoopWorker` (legacy) and the v1 `AgentLoopWorkerTQ`
(the default, `trainer.use_v1: true`), verl's post-processing (multi-modal inputs, M-RoPE position
ids, padding), the reward path (`RewardLoopWorker` -> reward manager -> our `compute_score`), and
for v1 the trainer's own `PPOTrainerSync.step` (replay buffer, batch balancing, log-prob /
advantage / metric code) and `_compute_metrics`.

What is emulated, and why:
- `FakeVLLMServer`: verl's vLLM server actor (`vLLMHttpServer.generate`, needs CUDA). Same
  signature (no **kwargs: an unknown argument fails as it would there), same handling of
  `max_tokens` / `logprobs`, the same `TokenOutput` with `extra_fields={"global_steps": ...}`, and
  vLLM's re-expansion of each image and video (verl's pad dedup, then vLLM's placeholder rule:
  images by their grid from the image processor, videos emulated by `gpu_probe.vllm_expand_prompt`
  with the request's `mm_processor_kwargs`): a prompt without exactly one placeholder per image
  and per video fails, and each request records the ids vLLM would run
  (`expanded_ids`), which tests compare with the ids verl trains on.
  Turns come from a script (text, token ids, or an exception to raise).
- `RayHandle` / `FakeLoadBalancer`: Ray's actor transport (`handle.method.remote(...)`) in-process.
- `InMemoryTransferQueue`: TransferQueue's Ray/ZMQ controller and storage units. The real package's
  `KVBatchMeta` and its storage manager's own packing (`_pack_field_values`: jagged nested tensors,
  `NonTensorStack`) are used, with its tag-merge and field-readiness rules.
- `TinyActor`: verl's FSDP actor/ref worker group (CUDA/NCCL). Log-probs and entropies are a real
  forward pass of the tiny model on what the trainer stored (ids, position ids, vision inputs).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
import transfer_queue
from tensordict import NonTensorData, NonTensorStack, TensorDict
from transfer_queue import KVBatchMeta
from transfer_queue.storage.managers.simple_storage_manager import AsyncSimpleStorageManager
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
from verl.utils import hf_processor, hf_tokenizer
from verl.utils.debug import marked_timer
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.utils import qwen2_5_vl_dedup_image_tokens
from verl.workers.rollout.replica import TokenOutput

from videoseek.agents.tiny_model import ensure_tiny_model
from videoseek.envs.env import EnvConfig
from videoseek.training.exports.verl_parquet import export_samples
from videoseek.training.gpu_probe import vllm_expand_prompt
from videoseek.training.verl_plugin.config import TrainSpec, compose, verl_overrides, write_agent_loop_yaml, write_spec_run_record

ENV = {"initial_frames": 4, "frames_per_call": 4, "max_turns": 3, "max_total_frames": 16, "max_pixels": 56 * 112}
CROP = '<think>The sparse frames miss it.</think><tool_call>{"name": "crop_video", "arguments": {"start": 11.5, "end": 14.0}}</tool_call>'
ZOOM = '<think>Closer.</think><tool_call>{"name": "zoom", "arguments": {"time": 12.5, "box": [0.25, 0.25, 0.75, 0.75]}}</tool_call>'
ANSWER = "<think>At 12.5s it is green.</think><answer>B</answer>"
# The custom tool of examples/custom_tool.py, by its file path (an absolute one: tests may run from any folder).
FRAME_AT_TOOL = f"{Path(__file__).resolve().parents[1] / 'examples' / 'custom_tool.py'}:FrameAtTool"
FRAME_AT = '<think>One frame.</think><tool_call>{"name": "frame_at", "arguments": {"time": 12.5}}</tool_call>'


def make_config(tmp_path, model, parquet, reward="default", response_length=256, group_size=2, batch_size=1, loop=None, overrides=None, env=None,
                prompt_length=1024, reward_params=None):  # fmt: skip
    spec = TrainSpec(
        model=str(model), train_files=[str(parquet)], val_files=[str(parquet)], out=str(tmp_path / "run"), reward=reward,
        reward_params=reward_params or {}, group_size=group_size, batch_size=batch_size, n_gpus=1, prompt_length=prompt_length, response_length=response_length,
        max_turn_tokens=64, env=env or ENV, loop=loop or {}, overrides={"actor_rollout_ref.rollout.agent.num_workers": 1, "data.dataloader_num_workers": 0, **(overrides or {})},
    )  # fmt: skip
    write_spec_run_record(spec, "verl", {}, [parquet])  # as run_csgrpo.py's verl backend writes it
    return compose(verl_overrides(spec, write_agent_loop_yaml(spec)))


# ---- Ray transport -------------------------------------------------------------------------------
class RayHandle:
    """`handle.method.remote(*args)` in-process: the arguments are copied (Ray serialises them), the
    call runs now, and the result is awaitable, as an ObjectRef."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)

        class _Method:
            @staticmethod
            def remote(*args, **kwargs):
                result = method(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                if inspect.isawaitable(result):
                    return result
                future = asyncio.get_running_loop().create_future()
                future.set_result(result)
                return future

        return _Method


class FakeLoadBalancer:
    """verl's `GlobalRequestLoadBalancer` with one server (no fields are routed)."""

    def __init__(self, server_handle: Any) -> None:
        self.server_handle = server_handle

    def require_acquire_fields(self) -> list[str]:
        return []

    def require_release_fields(self) -> list[str]:
        return []

    def acquire_server(self, request_id: str) -> tuple[str, Any]:
        return "server-0", self.server_handle

    def release_server(self, server_id: str) -> None:
        return None


def server_client(config, server: "FakeVLLMServer") -> LLMServerClient:
    """verl's real `LLMServerClient` in front of the emulated vLLM server."""
    return LLMServerClient(config, load_balancer_handle=RayHandle(FakeLoadBalancer(RayHandle(server))))


# ---- the vLLM server -----------------------------------------------------------------------------
class FakeVLLMServer:
    """verl's vLLM server contract with scripted turns (see the module docstring).

    `scripts` holds one script per conversation kind; the k-th conversation started from a given
    prompt (the G sessions of a question share it) follows `scripts[k % len(scripts)]`, whatever
    order the sessions' requests arrive in; a later request
    belongs to the conversation whose tokens so far prefix its prompt (verl's client sends a new
    request id every turn). A script's t-th entry is that conversation's t-th turn (the last
    repeats): a string (encoded, then `<|im_end|>`), a list of token ids, or an exception (raised).
    """

    def __init__(self, processor, turns=None, scripts=None, end_of_turn: bool = True, global_steps: int = 0, respond=None) -> None:
        # `respond(prompt_ids, video_data, sampling_params) -> text`: a deterministic policy instead of scripts.
        self.respond = respond
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.scripts = [list(t) for t in (scripts if scripts is not None else [turns or []])]
        self.end_of_turn = end_of_turn
        self.global_steps = global_steps
        self.end_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.video_pad = self.tokenizer.convert_tokens_to_ids("<|video_pad|>")
        self.image_pad = self.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.lengths: tuple[int, int] | None = None  # (rollout.prompt_length, rollout.response_length): the default max_tokens
        self.vision_start = self.tokenizer.convert_tokens_to_ids("<|vision_start|>")
        self.requests: list[dict[str, Any]] = []
        self.conversations: list[tuple[list[int], int, int]] = []  # (tokens so far, script, turns taken)
        self.started: dict[int, int] = defaultdict(int)  # first prompt -> conversations started from it
        self.lock = threading.Lock()

    def update_weights(self, global_steps: int) -> None:
        self.global_steps = global_steps

    def _next_turn(self, prompt_ids: list[int]) -> Any:
        with self.lock:
            for k, (prefix, script, taken) in enumerate(self.conversations):
                if len(prefix) <= len(prompt_ids) and prompt_ids[: len(prefix)] == prefix and taken:
                    del self.conversations[k]
                    break
            else:
                first = hash(tuple(prompt_ids))
                script, taken = self.started[first] % len(self.scripts), 0
                self.started[first] += 1
            turns = self.scripts[script]
            turn = turns[min(taken, len(turns) - 1)]
            if isinstance(turn, BaseException):
                return turn, None
            ids = list(turn) if isinstance(turn, list) else self.tokenizer.encode(turn, add_special_tokens=False) + ([self.end_id] if self.end_of_turn else [])
            return ids, (script, taken + 1)

    def _remember(self, prompt_ids: list[int], ids: list[int], state) -> None:
        with self.lock:
            self.conversations.append((list(prompt_ids) + ids, *state))

    def _expand_images(self, sent: list[int], image_data) -> list[int]:
        """vLLM's Qwen-VL image rule (emulated): the k-th `<|image_pad|>` becomes the k-th image's
        t * h * w / merge**2 pads, its grid from the HF image processor alone; one placeholder per image."""
        images = list(image_data or [])
        found = sent.count(self.image_pad)
        assert found == len(images), f"vLLM would not expand this prompt into its images: {found} placeholders for {len(images)} images"
        if not images:
            return sent
        grids = self.processor.image_processor(images=images, return_tensors="pt")["image_grid_thw"]
        merge = int(self.processor.image_processor.merge_size) ** 2
        pads = iter(int(g.prod()) // merge for g in grids)
        out: list[int] = []
        for token in sent:
            out += [self.image_pad] * next(pads) if token == self.image_pad else [token]
        return out

    def _check_vision(self, prompt_ids: list[int], image_data, video_data, mm_processor_kwargs) -> list[int]:
        """The ids vLLM would run for this request: verl's dedup, then each placeholder expanded (emulated),
        images (tool-returned frames on verl's `ToolAgentLoop`) and videos alike."""
        sent = self._expand_images(qwen2_5_vl_dedup_image_tokens(list(prompt_ids), self.processor), image_data)
        if not video_data:
            assert self.video_pad not in sent, "video placeholders but no videos"
            return sent
        try:
            return vllm_expand_prompt(sent, list(video_data), self.processor, mm_processor_kwargs)
        except ValueError as exc:
            raise AssertionError(f"vLLM would not expand this prompt into its videos: {exc}") from exc

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data=None,
        video_data=None,
        audio_data=None,
        mm_processor_kwargs=None,
        priority: int = 0,
        kv_transfer_params=None,
    ) -> TokenOutput:
        await asyncio.sleep(0)
        sampling_params = dict(sampling_params)
        if "max_tokens" in sampling_params:
            max_tokens = sampling_params.pop("max_tokens")
        else:  # vLLMHttpServer's default (verl's ToolAgentLoop sends none): the response length, within the context
            prompt_length, response_length = self.lengths
            max_tokens = min(response_length, prompt_length + response_length - len(prompt_ids))
        want_logprobs = bool(sampling_params.pop("logprobs", False))
        expanded = self._check_vision(list(prompt_ids), image_data, video_data, mm_processor_kwargs)
        with self.lock:
            self.requests.append(
                {"request_id": request_id, "prompt_ids": list(prompt_ids), "expanded_ids": expanded, "mm_processor_kwargs": mm_processor_kwargs, "max_tokens": max_tokens,
                 "images": len(image_data or [])}
            )
        if self.respond is not None:
            text = self.respond(list(prompt_ids), video_data, sampling_params)
            ids, state = self.tokenizer.encode(text, add_special_tokens=False) + [self.end_id], None
        else:
            ids, state = self._next_turn(list(prompt_ids))
            if state is None:
                raise ids
        ids = ids[:max_tokens]
        if state is not None:
            self._remember(prompt_ids, ids, state)
        log_probs = [-0.25 - 0.001 * k for k in range(len(ids))] if want_logprobs else None
        return TokenOutput(token_ids=ids, log_probs=log_probs, stop_reason="completed", extra_fields={"global_steps": self.global_steps, "num_cached_tokens": 0})


class InProcessReward:
    """A Ray handle's `compute_score.remote` for verl's real `RewardLoopWorker`, called in-process.

    The data is copied as Ray's serialisation would: verl's reward manager updates the row's
    `extra_info` dict in place, and the G sessions of a prompt share that dict inside the worker.
    """

    def __init__(self, config) -> None:
        from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

        worker = RewardLoopWorker(config)

        class _Method:
            @staticmethod
            def remote(data):
                return worker.compute_score(copy.deepcopy(data))

        self.compute_score = _Method()


def load_batch(cfg, tokenizer, processor, n):
    """One row of the training parquet through verl's dataset, repeated `n` times (legacy layout)."""
    dataset = RLHFDataset(list(cfg.data.train_files), tokenizer, cfg.data, processor)
    batch = DataProto.from_single_dict(collate_fn([dataset[0]]))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4())], dtype=object)
    return batch.repeat(repeat_times=n, interleave=True)


# ---- TransferQueue -------------------------------------------------------------------------------
class InMemoryTransferQueue:
    """TransferQueue's KV API (`transfer_queue.kv_*`, `async_kv_*`) over a dict; thread-safe."""

    API = ("kv_put", "kv_batch_put", "kv_batch_get", "kv_list", "kv_clear")

    def __init__(self) -> None:
        self.tags: dict[str, dict[str, dict]] = defaultdict(dict)
        self.fields: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.lock = threading.RLock()
        self.tag_history: list[tuple[str, str, dict]] = []  # (partition, key, tag) of every tag put, for tests

    def install(self, monkeypatch) -> "InMemoryTransferQueue":
        monkeypatch.setattr(transfer_queue, "init", lambda conf=None: conf)
        monkeypatch.setattr(transfer_queue, "close", lambda: None)
        for name in self.API:
            sync = getattr(self, name)
            monkeypatch.setattr(transfer_queue, name, sync)
            monkeypatch.setattr(transfer_queue, "async_" + name, _as_async(sync))
        return self

    @staticmethod
    def _rows(fields: TensorDict | dict | None, n: int) -> dict[str, list[Any]]:
        """Per-sample values of each field, as the storage units keep them."""
        if fields is None:
            return {}
        out = {}
        for name in fields.keys():
            value = fields.get(name) if isinstance(fields, TensorDict) else fields[name]
            if isinstance(value, torch.Tensor):
                out[name] = list(value.unbind())
            elif isinstance(value, NonTensorStack):
                out[name] = value.tolist()
            elif isinstance(value, NonTensorData):
                out[name] = [value.data] * n
            else:
                out[name] = list(value)
            if len(out[name]) != n:
                raise ValueError(f"field {name!r} has {len(out[name])} samples for {n} keys")
        return out

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None) -> KVBatchMeta:
        if fields is None and tags is None:
            raise ValueError("Please provide at least one parameter of fields or tags.")
        keys = list(keys)
        rows = self._rows(fields, len(keys))
        with self.lock:
            for i, key in enumerate(keys):
                tag = self.tags[partition_id].setdefault(key, {})
                if tags is not None:
                    tag.update(tags[i])
                    self.tag_history.append((partition_id, key, dict(tags[i])))
                stored = self.fields[partition_id].setdefault(key, {})
                for name, values in rows.items():
                    stored[name] = values[i]
            return self._meta(keys, partition_id)

    def kv_put(self, key, partition_id, fields=None, tag=None, data_parser=None) -> KVBatchMeta:
        if isinstance(fields, dict):
            fields = {k: (v.unsqueeze(0) if isinstance(v, torch.Tensor) else NonTensorStack(v)) for k, v in fields.items()}
        return self.kv_batch_put([key], partition_id, fields=fields, tags=None if tag is None else [tag])

    def kv_batch_get(self, keys, partition_id, select_fields=None) -> TensorDict:
        keys = [keys] if isinstance(keys, str) else list(keys)
        with self.lock:
            stored = self.fields[partition_id]
            missing = [k for k in keys if k not in stored and k not in self.tags[partition_id]]
            if missing or not keys:
                raise ValueError("keys or partition were not found!")
            present = [name for k in keys for name in stored.get(k, {})]
            names = list(dict.fromkeys(present)) if select_fields is None else [f for f in ([select_fields] if isinstance(select_fields, str) else select_fields) if f in present]
            if any(name not in stored.get(k, {}) for k in keys for name in names):
                raise ValueError("Some fields are not ready in all the requested keys!")
            packed = {name: AsyncSimpleStorageManager._pack_field_values([stored[k][name] for k in keys]) for name in names}
        return TensorDict(packed, batch_size=len(keys))

    def kv_list(self, partition_id=None) -> dict[str, dict[str, Any]]:
        with self.lock:
            parts = [partition_id] if partition_id is not None else list(self.tags)
            return {p: {k: dict(t) for k, t in self.tags[p].items()} for p in parts if p in self.tags}

    def kv_clear(self, keys, partition_id) -> None:
        keys = [keys] if isinstance(keys, str) else list(keys)
        with self.lock:
            for key in keys:
                self.tags[partition_id].pop(key, None)
                self.fields[partition_id].pop(key, None)

    def _meta(self, keys: list[str], partition_id: str) -> KVBatchMeta:
        names = sorted({n for k in keys for n in self.fields[partition_id].get(k, {})})
        return KVBatchMeta(keys=keys, tags=[dict(self.tags[partition_id][k]) for k in keys], partition_id=partition_id, fields=names)


def _as_async(fn: Callable) -> Callable:
    async def call(*args, **kwargs):
        return fn(*args, **kwargs)

    return call


# ---- the v1 worker and trainer -------------------------------------------------------------------
def unwrapped_actor_class(actor_class) -> type:
    """The Python class behind a `@ray.remote` actor class (to run it in-process)."""
    return next(c for c in actor_class.__ray_metadata__.modified_class.__mro__ if c.__name__ == actor_class.__ray_metadata__.class_name)


class EventLoopThread:
    """The agent-loop worker's event loop in a thread, as in its Ray actor; the trainer stays synchronous."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 300):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class InProcessAgentLoopManager:
    """`AgentLoopManagerTQ.generate_sequences` with its workers called in-process (one worker)."""

    def __init__(self, worker, loop_thread: EventLoopThread) -> None:
        self.worker, self.loop_thread = worker, loop_thread

    def generate_sequences(self, prompts: TensorDict) -> None:
        self.loop_thread.run(self.worker.generate_sequences(prompts))


class ServerCheckpointManager:
    """verl's `CheckpointEngineManager` for the emulated server: weight sync is a version bump."""

    def __init__(self, server: FakeVLLMServer) -> None:
        self.server = server

    def update_weights(self, global_steps: int | None = None) -> None:
        if global_steps is not None:
            self.server.update_weights(global_steps)

    def sleep_replicas(self) -> None:
        return None


class TinyActor:
    """verl's actor/ref worker group on CPU (see the module docstring): real log-probs, no optimizer."""

    def __init__(self, model_path) -> None:
        from transformers import AutoModelForImageTextToText

        self.model = AutoModelForImageTextToText.from_pretrained(model_path).eval()
        self._dispatch_info = {"actor": [0]}  # one data-parallel rank
        self.updates: list[dict[str, Any]] = []

    def compute_log_prob(self, batch: KVBatchMeta) -> KVBatchMeta:
        data = transfer_queue.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["input_ids", "position_ids", "multi_modal_inputs"])
        log_probs, entropies = [], []
        with torch.inference_mode():
            for ids, positions, mm in zip(data["input_ids"].unbind(), data["position_ids"].unbind(), list(data["multi_modal_inputs"])):
                vision = {k: v for k, v in (mm or {}).items() if k in ("pixel_values_videos", "video_grid_thw", "second_per_grid_ts", "pixel_values", "image_grid_thw")}
                logits = self.model(input_ids=ids[None], position_ids=positions[:, None] if positions.dim() == 2 else positions[None], **vision).logits[0].float()
                logp = torch.log_softmax(logits, dim=-1)
                shifted = torch.cat([logp[:-1].gather(-1, ids[1:, None])[:, 0], logp.new_zeros(1)])  # position t scores token t+1
                log_probs.append(shifted)
                entropies.append(-(logp.exp() * logp).sum(-1))
        out = TensorDict(
            {"log_probs": torch.nested.as_nested_tensor(log_probs, layout=torch.jagged), "entropy": torch.nested.as_nested_tensor(entropies, layout=torch.jagged)},
            batch_size=len(batch),
        )
        return transfer_queue.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=out)

    def update_actor(self, batch: KVBatchMeta) -> TensorDict:
        data = transfer_queue.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["advantages", "response_mask"])
        self.updates.append({"keys": list(batch.keys), "advantages": [a.clone() for a in data["advantages"].unbind()]})
        return {"metrics": {"mfu": 0.0, "pg_loss": 0.0}}


def build_v1_trainer(cfg, worker, server: FakeVLLMServer, actor: TinyActor, loop_thread: EventLoopThread):
    """verl's `PPOTrainerSync`: its own `__init__`, tokenizer and dataloaders, wired to the in-process pieces."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils.skip import SkipManager

    trainer = PPOTrainerSync.__new__(PPOTrainerSync)
    PPOTrainer.__init__(trainer, cfg)
    SkipManager.init(cfg)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer.global_steps = 0
    trainer.curr_step_profile = False
    trainer.ref_in_actor = True
    trainer.actor_rollout_wg = actor
    trainer.agent_loop_manager = InProcessAgentLoopManager(worker, loop_thread)
    trainer.checkpoint_manager = ServerCheckpointManager(server)
    trainer.reward_loop_manager = type("RewardLoopManager", (), {"reward_loop_worker_handles": worker.reward_loop_worker_handles})()
    trainer._get_n_gpus_for_throughput = lambda: 1
    trainer.on_init_end()
    return trainer


class V1Run:
    """The v1 worker (in its event-loop thread) and trainer for one config and server."""

    def __init__(self, cfg, model, scripts=None, respond=None, server=None):
        self.cfg = cfg
        self.tokenizer = hf_tokenizer(str(model))
        self.server = server or FakeVLLMServer(hf_processor(str(model)), scripts=scripts, respond=respond)
        rollout = cfg.actor_rollout_ref.rollout
        self.server.lengths = (int(rollout.prompt_length), int(rollout.response_length))
        self.loop_thread = EventLoopThread()
        worker_cls = unwrapped_actor_class(AgentLoopWorkerTQ)

        async def make_worker():  # agent loops and reward workers capture the running loop
            return worker_cls(cfg, server_client(cfg, self.server), reward_loop_worker_handles=[InProcessReward(cfg)])

        self.worker = self.loop_thread.run(make_worker())
        self.actor = TinyActor(model)
        self.trainer = build_v1_trainer(cfg, self.worker, self.server, self.actor, self.loop_thread)

    def step(self):
        """One iteration of `PPOTrainer.fit`'s loop body: step, metrics, cleanup."""
        trainer = self.trainer
        trainer.global_steps += 1
        metrics, timing = {}, {}
        trainer.timing_raw = timing  # as fit() sets it
        with marked_timer("step", timing):
            batch = trainer.step(metrics, timing)
            trainer.on_step_end()
        trainer._compute_metrics(batch, metrics, timing, global_steps=trainer.global_steps, epoch=0)
        self.field_names = set(transfer_queue.kv_batch_get(keys=batch.keys, partition_id="train").keys())
        stored = transfer_queue.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields", "response_mask", "responses", "rm_scores", "advantages", "position_ids", "input_ids", "multi_modal_inputs", "prompts", "attention_mask"])
        transfer_queue.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
        return batch, metrics, stored

    def close(self):
        self.loop_thread.close()


# ---- the agent-loop worker with the tiny model, and its module fixtures ----------------------------
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return ensure_tiny_model(cache_dir=tmp_path_factory.mktemp("models"))


class TinyModelServer(FakeVLLMServer):
    """Generates with the tiny model from token ids and raw frames, as a vLLM server does."""

    def __init__(self, model_path, do_sample: bool = True):
        from transformers import AutoModelForImageTextToText

        super().__init__(hf_processor(str(model_path)), turns=[""])
        self.model = AutoModelForImageTextToText.from_pretrained(model_path).eval()
        self.do_sample = do_sample  # False: greedy, as a policy with temperature 0
        self.calls = 0

    async def generate(self, prompt_ids, sampling_params, request_id, image_data=None, video_data=None, audio_data=None, mm_processor_kwargs=None, priority=0, kv_transfer_params=None):
        prompt_ids = self._check_vision(list(prompt_ids), image_data, video_data, mm_processor_kwargs)  # what vLLM runs: each video expanded
        inputs = {"input_ids": torch.tensor([prompt_ids]), "attention_mask": torch.ones(1, len(prompt_ids), dtype=torch.long)}
        if video_data:
            frames, metadata = zip(*video_data)
            vision = self.processor.video_processor(
                videos=list(frames), video_metadata=list(metadata), do_sample_frames=False, return_tensors="pt", **(mm_processor_kwargs or {})
            )
            inputs.update(pixel_values_videos=vision["pixel_values_videos"], video_grid_thw=vision["video_grid_thw"])
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(self.calls)
            sampling = {"do_sample": True, "temperature": 1.0} if self.do_sample else {"do_sample": False}
            out = self.model.generate(**inputs, max_new_tokens=sampling_params["max_tokens"], output_scores=True, return_dict_in_generate=True, **sampling)
        self.calls += 1
        ids = out.sequences[0, len(prompt_ids) :].tolist()
        log_probs = None
        if sampling_params.get("logprobs"):  # the sampled tokens' log-probabilities, as vLLM returns them
            log_probs = [float(torch.log_softmax(score[0].float(), -1)[t]) for score, t in zip(out.scores, ids)]
        return TokenOutput(token_ids=ids, log_probs=log_probs, extra_fields={"global_steps": 0})


def run_worker(cfg, server, n=2):
    async def main():
        worker = AgentLoopWorker(cfg, server_client(cfg, server), reward_loop_worker_handles=[InProcessReward(cfg)])
        batch = load_batch(cfg, worker.tokenizer, worker.processor, n)
        return worker, await worker.generate_sequences(batch)

    return asyncio.run(main())


def scripted(tiny_model, turns, **kwargs):
    return FakeVLLMServer(hf_processor(str(tiny_model)), turns, **kwargs)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, index_sample_module):
    out = tmp_path_factory.mktemp("export")
    return export_samples([index_sample_module], out, "train", EnvConfig(**ENV), progress=False)


@pytest.fixture(scope="module")
def index_sample_module(index_video):
    from videoseek.envs.sample import VideoSample

    return VideoSample(
        id="idx-1", video=str(index_video), question="Which colour flashes?", options=["A. red", "B. green", "C. blue", "D. yellow"],
        answer="B", clue_intervals=[(12.0, 13.5)], mask_patterns=[{"time_range": (3.0, 4.0), "oracle_correct": True}],
    )  # fmt: skip

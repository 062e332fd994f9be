"""The `Policy` protocol: what every agent (scripted, transformers, vLLM) implements.

A policy sees a batch of live episodes and returns one assistant turn for each. Batching across
episodes is the policy's business: model policies run one generate call per batch, scripted ones
loop. Model policies also return token ids so training can reuse them without re-tokenising.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from videoseek.envs.evidence import EvidenceState
    from videoseek.envs.sample import VideoSample


def stable_seed(*parts: object) -> int:
    """A seed from identities (ids, turn numbers): the same on every run and process, unlike
    `hash()`, which Python salts per process."""
    return zlib.crc32(repr(parts).encode())


@dataclass
class Message:
    """One conversation message; `frames` (uint8 (n,H,W,3)) and `timestamps` (s) for visual turns."""

    role: str  # "system" | "user" | "assistant" | "tool"
    text: str
    frames: np.ndarray | None = None
    timestamps: np.ndarray | None = None
    # The sampled ids of an assistant turn: renderers use them verbatim, never re-tokenising.
    token_ids: list[int] | None = None

    @property
    def num_frames(self) -> int:
        return 0 if self.frames is None else int(len(self.frames))


@dataclass
class PolicyInput:
    """What a policy sees of one live episode at one turn."""

    sample: VideoSample
    messages: list[Message]
    evidence: EvidenceState
    turn: int
    episode_id: str = ""
    # A per-episode generator, seeded from the episode id and seed: scripted policies draw from it
    # so results do not depend on batch composition.
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    # The assistant turn already begun (ProcessThinker continuations of a step prefix): model
    # policies return only what follows it; scripted policies, which do not condition on text,
    # return a whole turn.
    prefix: str = ""
    # The env's tool schemas (`info["tools"]`): model policies render the conversation with them.
    # None: the policy's own list (its `tools` argument).
    tools: list[dict[str, Any]] | None = None


@dataclass
class PolicyOutput:
    """One assistant turn; token fields are filled by model policies."""

    text: str
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None


@runtime_checkable
class Policy(Protocol):
    name: str

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]: ...


def load_policy(spec: str, **kwargs: Any) -> Policy:
    """`oracle`, `uniform`, `random`, `no-tool`, `hf:PATH` or `vllm:PATH`."""
    from videoseek.agents.scripted import SCRIPTED

    if spec in SCRIPTED:
        return SCRIPTED[spec]()
    if spec.startswith("hf:"):
        from videoseek.agents.hf_policy import TransformersPolicy

        return TransformersPolicy(spec[3:], **kwargs)
    if spec.startswith("vllm:"):
        from videoseek.agents.vllm_policy import VLLMPolicy

        return VLLMPolicy(spec[5:], **kwargs)
    raise ValueError(f"unknown policy {spec!r}: use one of {sorted(SCRIPTED)}, hf:PATH or vllm:PATH")

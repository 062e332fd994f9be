"""The `Policy` protocol: what every agent (scripted, transformers, vLLM, a served model) implements,
and the registry of policy kinds that `load_policy` builds from a spec.

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
    # An assistant turn the episode's start wrote, not the policy (`agents.groups.look_on_start`):
    # rendered like any other, never trained on.
    forced: bool = False

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
    # Token counts as a server reports them ({"prompt": n, "completion": n}, a served policy):
    # the driver records them as the turn's `tokens` (else the lengths of the ids above).
    usage: dict[str, int] | None = None
    # Set when the policy got no usable turn (a served model's reply without a choice or text):
    # the driver plays it as the env's `Invalid(reason)` turn instead of `text`.
    invalid: str | None = None


@runtime_checkable
class Policy(Protocol):
    name: str

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]: ...


# ---- the registry of policy kinds ----------------------------------------------------------------
# A kind is named by a prefix (`hf:PATH`, `vllm:PATH`, `openai:URL#MODEL`) and built by the callable
# at an import path, `factory(target, **kwargs)` with `target` the text after the prefix; named
# policies (the scripted ones) come from tables of `name -> factory()` at import paths. The paths
# are strings, imported only when a spec asks for them: this module, which every implementation
# imports for the protocol, imports none of them.
POLICY_KINDS: dict[str, str] = {
    "hf": "videoseek.agents.hf_policy:TransformersPolicy",
    "vllm": "videoseek.agents.vllm_policy:VLLMPolicy",
    "openai": "videoseek.agents.openai_policy:OpenAIPolicy",
}
NAMED_POLICY_TABLES: list[str] = ["videoseek.agents.scripted:SCRIPTED"]


def register_policy_kind(prefix: str, factory: str) -> None:
    """Make `PREFIX:TARGET` build `factory(TARGET, **kwargs)`; `factory` is "package.module:callable",
    imported when a spec first names the prefix (e.g. `register_policy_kind("sglang", "mypkg.policy:SGLangPolicy")`)."""
    if not prefix.isidentifier() or ":" not in factory:
        raise ValueError(f"register_policy_kind({prefix!r}, {factory!r}): expected a word and 'package.module:callable'")
    POLICY_KINDS[prefix] = factory


def policy_kind(spec: str) -> str | None:
    """The registered prefix `spec` starts with (`hf` for `hf:PATH`); None for a name.

    >>> policy_kind("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-VL-7B-Instruct"), policy_kind("oracle")
    ('openai', None)
    """
    prefix, sep, _ = spec.partition(":")
    return prefix if sep and prefix in POLICY_KINDS else None


def _resolve(path: str) -> Any:
    import importlib

    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def named_policies() -> dict[str, Any]:
    """Every named policy (`oracle`, `uniform`, ...): name -> factory()."""
    table: dict[str, Any] = {}
    for path in NAMED_POLICY_TABLES:
        table.update(_resolve(path))
    return table


def load_policy(spec: str, **kwargs: Any) -> Policy:
    """The policy `spec` names: a named one (`oracle`, `uniform`, `random`, `no-tool`, ...) or a
    registered kind, `hf:PATH`, `vllm:PATH` or `openai:URL[#MODEL]` (`kwargs` go to its factory)."""
    kind = policy_kind(spec)
    if kind is not None:
        return _resolve(POLICY_KINDS[kind])(spec[len(kind) + 1 :], **kwargs)
    named = named_policies()
    if spec in named:
        return named[spec]()
    kinds = ", ".join(f"{k}:{'URL[#MODEL]' if k == 'openai' else 'PATH'}" for k in POLICY_KINDS)
    raise ValueError(f"unknown policy {spec!r}: use one of {sorted(named)}, {kinds}")

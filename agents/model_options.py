"""The options a model policy is built with, typed once for every backend.

`Decoding` is how a turn is sampled, the same for the transformers policy, the vLLM policy and a
served model (`openai:`): tokens per turn, temperature, top-p, top-k, the seed every episode's
turns are seeded from, and the stop strings that end a turn. `ModelPolicyOptions` adds how a local
checkpoint renders the conversation (frames as a video or images, the chat template, the frame
pixel bounds, the tool list until the env's `info["tools"]` says otherwise) and the policy's name.

`TransformersPolicy(path, options, **fields)` and `VLLMPolicy(path, options, **fields)` take one
`ModelPolicyOptions` and/or its fields as keywords (`TransformersPolicy(path, temperature=0)`), so
the two constructors cannot drift apart; a misspelt field is a `TypeError` that names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from videoseek.agents.prompting import DEFAULT_STOP_STRINGS, MODES

T = TypeVar("T", bound="Decoding")


@dataclass(frozen=True)
class Decoding:
    """How one assistant turn is sampled. `temperature=0` decodes greedily; `top_k=None` is off."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    seed: int = 0
    stop: tuple[str, ...] = DEFAULT_STOP_STRINGS

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))
        if self.top_k == 0:  # as the policies always read it: 0 is off
            object.__setattr__(self, "top_k", None)
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}, {self.top_p}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be at least 1 (or None: off), got {self.top_k}")

    def set_on(self, policy: Any) -> None:
        """Copy the fields onto `policy` as plain attributes: training flips a policy's
        `temperature` to 0 for a greedy probe and back, and the policies read them per turn."""
        for name in ("max_new_tokens", "temperature", "top_p", "top_k", "seed", "stop"):
            setattr(policy, name, getattr(self, name))

    def record(self) -> dict[str, Any]:
        """The decoding as run.json records it."""
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "seed": self.seed, "stop": list(self.stop)}  # fmt: skip


@dataclass(frozen=True)
class ModelPolicyOptions(Decoding):
    """`Decoding` plus how a local checkpoint renders the conversation (`ConversationRenderer`):
    `mode` "video" (each message's frames as one video) or "images" (one timestamp-labelled image
    per frame), `chat_template` ("videoseek", "model" or a Jinja string), the per-frame pixel
    bounds, `tools` (True: the default tools, False: none, or tool names) until an input carries
    the env's schemas, and `name` (default: the kind and the checkpoint folder's name)."""

    mode: str = "video"
    chat_template: str = "videoseek"
    min_pixels: int | None = None
    max_pixels: int | None = None
    tools: bool | tuple[str, ...] = True
    name: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not isinstance(self.tools, bool):
            object.__setattr__(self, "tools", tuple(self.tools))

    def renderer_kwargs(self) -> dict[str, Any]:
        """The `ConversationRenderer` keywords of these options."""
        return {"mode": self.mode, "chat_template": self.chat_template, "min_pixels": self.min_pixels, "max_pixels": self.max_pixels,
                "tools": self.tools}  # fmt: skip


def field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def split_options(cls: type[T], options: T | None, kwargs: Mapping[str, Any], owner: str,
                  extra: Sequence[str] | None = ()) -> tuple[T, dict[str, Any]]:
    """(`options` with the fields named in `kwargs` replaced, the other kwargs).

    `extra=None` lets other names through (the vLLM policy hands them to `vllm.LLM`); otherwise a
    name that is neither a field nor in `extra` is a TypeError naming `owner`.
    """
    names = field_names(cls)
    fields = {k: v for k, v in kwargs.items() if k in names}
    rest = {k: v for k, v in kwargs.items() if k not in names}
    if extra is not None:
        unknown = sorted(set(rest) - set(extra))
        if unknown:
            raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
    base = options if options is not None else cls()
    if not isinstance(base, cls):
        raise TypeError(f"{owner}(): options must be a {cls.__name__}, got {type(base).__name__}")
    return (dataclasses.replace(base, **fields) if fields else base), rest

"""Tell TRL how to read VideoSeek's assistant turns (its response parser).

TRL's `add_response_schema` recognises a chat template by exact text; the project's own
(`agents.prompting.VIDEOSEEK_CHAT_TEMPLATE`, which the tiny models ship) and Qwen2.5-VL's are not
in its list. VideoSeek's protocol is Qwen3's: `<think>...</think>` then Hermes `<tool_call>` JSON
ended by `<|im_end|>`, so TRL's own Qwen3 parser reads it. This sets it explicitly, as the
new-style `response_template` on transformers >= 5.13 and the legacy `response_schema` before
(which needs `jmespath`), mirroring `trl.chat_template_utils.add_response_schema`.
"""

from __future__ import annotations

from typing import Any


def add_response_schema(processing_class: Any) -> Any:
    """`processing_class` (a processor or tokenizer) with TRL's Qwen3 response parser set on its tokenizer."""
    from trl.chat_template_utils import _SUPPORTS_RESPONSE_TEMPLATE, qwen3_schema, qwen3_template

    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    if _SUPPORTS_RESPONSE_TEMPLATE:
        tokenizer.response_template = qwen3_template
    else:
        tokenizer.response_schema = qwen3_schema
    return processing_class

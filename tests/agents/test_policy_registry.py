"""Policy kinds are a registry keyed by prefix (`hf:`, `vllm:`, `openai:`) plus the named scripted
policies, resolved from import-path strings so the protocol module imports no implementation; the
transformers and vLLM policies take one shared options object (`ModelPolicyOptions`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from videoseek.agents.openai_policy import OpenAIPolicy
from videoseek.agents.policy import POLICY_KINDS, load_policy, policy_kind


def test_policy_kinds_are_a_registry_and_the_protocol_module_imports_no_implementation():
    assert set(POLICY_KINDS) >= {"hf", "vllm", "openai"} and policy_kind("openai:http://h/v1") == "openai" and policy_kind("oracle") is None
    assert isinstance(load_policy("openai:http://127.0.0.1:9/v1#m", temperature=0), OpenAIPolicy)
    assert load_policy("oracle").name == "oracle"
    with pytest.raises(ValueError, match=r"unknown policy 'wizard': use one of \[.*'oracle'.*\], hf:PATH, vllm:PATH, openai:URL\[#MODEL\]"):
        load_policy("wizard")
    code = ("import sys, videoseek.agents.policy; mods = [m for m in ('hf_policy', 'vllm_policy', 'openai_policy', 'scripted') "
            "if 'videoseek.agents.' + m in sys.modules]; print(mods)")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_model_policies_share_one_options_object():
    import inspect

    from videoseek.agents.hf_policy import TransformersPolicy
    from videoseek.agents.model_options import Decoding, ModelPolicyOptions
    from videoseek.agents.vllm_policy import VLLMPolicy

    for cls in (TransformersPolicy, VLLMPolicy):
        assert "options" in inspect.signature(cls).parameters and "temperature" not in inspect.signature(cls).parameters
    with pytest.raises(TypeError, match="TransformersPolicy\\(\\) got an unexpected keyword argument 'temprature'"):
        TransformersPolicy("/nonexistent", temprature=0)
    with pytest.raises(ValueError, match="top_p"):
        ModelPolicyOptions(top_p=0)
    assert ModelPolicyOptions(tools=["crop_video"]).tools == ("crop_video",) and issubclass(ModelPolicyOptions, Decoding)
    assert Decoding(top_k=0).top_k is None

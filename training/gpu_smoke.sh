#!/usr/bin/env bash
# GPU smoke run of the local GRPO backend: a few steps of the tiny offline Qwen2.5-VL on CUDA
# (synthetic videos, the PRR preset so that random rollouts differ in reward and the gradient is
# not zero), then one line per step: reward, loss, KL, grad norm, step time, peak GPU memory.
#
# The device machine has Python 3.12 with torch, transformers, numpy, pandas, PIL and pyyaml, and
# no network. The other packages travel as wheels in .whl/ (about 42 MB, under the 64 MiB a call
# may carry). Prepare them here once (needs PyPI), then run there from the repository root:
#
#     bash training/gpu_smoke.sh --download        # here: fills .whl/ (add /.whl/ to .git/info/exclude)
#     bash training/gpu_smoke.sh                   # there, with `.whl` carried; STEPS=4 REWARD=prr by default
#
# Ray's wheel (79 MB) does not fit. The local backend never starts Ray, but verl's package imports
# it at module level (`verl/protocol.py`), so when `import ray` fails this script puts a stand-in
# module on the path that only satisfies that import; verl's entry-point plugins are switched off
# (VERL_USE_EXTERNAL_PLUGINS=none) because the agent loop they would import needs the real Ray.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=(
  verl==0.9.1 tensordict==0.10.0 orjson==3.13.0 pyvers==0.2.3 importlib_metadata==10.2.0 codetiming==1.4.0
  omegaconf==2.3.1 hydra-core==1.3.8 dill==0.4.1 gymnasium==1.4.0 farama-notifications==0.0.6
  pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  nltk==3.10.4 defusedxml==0.7.1 pysbd==0.3.4 av==18.1.0
)

if [[ "${1:-}" == "--download" ]]; then
  mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${WHEELS[@]}"
  # antlr4-python3-runtime 4.9.3 (hydra's pin) is published as a source archive only: build its pure-Python wheel.
  python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
  du -sh .whl
  exit 0
fi

PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/videoseek-site}
RUN=${OUT:-/tmp/videoseek-gpu-smoke}
mkdir -p "$SITE" "$RUN"
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
fi
$PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target "$SITE" .
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 VERL_USE_EXTERNAL_PLUGINS=none
if ! $PY -c "import ray" 2>/dev/null; then
  mkdir -p /tmp/videoseek-ray/ray
  cat >/tmp/videoseek-ray/ray/__init__.py <<'EOF'
"""Stand-in for Ray on a machine without it: satisfies `import ray` in verl; any use is a no-op object."""
class _Unused:
    def __init__(self, name): self._name = name
    def __getattr__(self, key): return _Unused(f"{self._name}.{key}")
    def __call__(self, *args, **kwargs): return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else _Unused(self._name)
def __getattr__(name): return _Unused("ray." + name)
EOF
  export PYTHONPATH="$PYTHONPATH:/tmp/videoseek-ray"
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
$PY -c "import torch, transformers; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"

cat >"$RUN/smoke.yaml" <<'EOF'
group_size: 4
batch_size: 2
max_turn_tokens: 64
env: {initial_frames: 4, frames_per_call: 4, max_turns: 3, max_total_frames: 16, max_pixels: 12544, video_backend: pyav}
EOF
$PY training/run_csgrpo.py --backend local --device cuda --steps "${STEPS:-4}" --reward "${REWARD:-prr}" \
  --synthetic-n 4 --config "$RUN/smoke.yaml" --out "$RUN/run"

$PY - "$RUN/run/metrics.jsonl" <<'EOF'
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
keys = ("reward", "accuracy", "loss", "kl", "grad_norm", "policy_tokens", "time/step_s", "gpu/max_memory_gb")
print("step " + " ".join(f"{k:>16}" for k in keys))
for r in rows:
    print(f"{r['step']:4d} " + " ".join(f"{r.get(k, float('nan')):16.5g}" for k in keys))
finite = all(math.isfinite(r[k]) for r in rows for k in ("loss", "kl", "grad_norm"))
moved = any(r["grad_norm"] > 0 for r in rows) and rows[-1]["kl"] > 0
print("SMOKE", "OK" if finite and moved else "FAILED", f"(finite loss/KL/grad: {finite}; policy moved from the reference: {moved})")
sys.exit(0 if finite and moved else 1)
EOF

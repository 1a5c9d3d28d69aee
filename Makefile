# Two entry points: `make figures` (the embedded default, every figure) and `make test` (the whole suite).
# Both build their own virtual environment first.
#
#   TORCH_PIN         the torch requirement installed into the venv (default: the CPU wheel torch==2.13.0).
#   USE_SYSTEM_TORCH  set to 1 to keep the torch you already have (GPU users): the venv then sees the
#                     interpreter's site-packages and torch is not installed.
#   CORES             cores given to Snakemake (default: all).
#   SCALE             config preset for `make figures` (default: default).

PYTHON ?= python3
VENV ?= .venv
TORCH_PIN ?= torch==2.13.0
USE_SYSTEM_TORCH ?= 0
CORES ?= all
SCALE ?= default

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ifeq ($(USE_SYSTEM_TORCH),1)
VENV_FLAGS := --system-site-packages
TORCH_REQ :=
else
VENV_FLAGS :=
TORCH_REQ := $(TORCH_PIN)
endif

.PHONY: figures test test-fast lint venv clean reference schema docs

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $(TORCH_REQ) -c requirements.lock -e '.[test,triton]'
	touch $@

# `qscaling run` is snakemake that resumes by itself after a crash (a stale lock is cleared when no run is live).
figures: $(STAMP)
	$(BIN)/qscaling run --cores $(CORES) --config scale=$(SCALE)

# Lint with zero findings first (ruff, snakefmt, snakemake --lint), then the whole suite on two workers (each test
# of a shared smoke run on the worker that makes that run: tests/conftest.py).
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup

# For working sessions: everything but the end-to-end DAG runs (tests marked slow), in about 10 minutes on 2 cores.
test-fast: lint
	QSCALING_TEST_TIER=fast $(BIN)/python -m pytest -m "not slow" -n 2

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check .
	$(BIN)/snakemake --lint --quiet

# The config's JSON schema, generated from the settings types (tests/test_config_schema.py fails when it is stale).
schema: $(STAMP)
	$(BIN)/python -c 'from qscaling.pipeline import write_config_schema; write_config_schema()'

reference: $(STAMP)
	BIN=$(BIN) CORES=$(CORES) reference/regenerate.sh smoke default
	$(MAKE) docs

# The README's results block and docs/results.md, from the committed default run's claims (tests/test_docs.py
# fails when they disagree).
docs: $(STAMP)
	$(BIN)/python -c 'from qscaling.report import write_docs; write_docs("reference/default")'

clean:
	rm -rf results logs benchmarks/*/ .snakemake figures/*/

# fedgraphrec — set-up, demo and tests. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Real datasets for the tests that use them (skipped with a reason when absent).
export FEDGRAPHREC_DATA ?= $(if $(wildcard ../shared/datasets),$(abspath ../shared/datasets),)

.PHONY: setup demo test test-deploy lint typecheck unit docs clean

setup: $(VENV)/.installed

# torch is installed first and pinned to 2.13.0: that CPU wheel is what `pip` finds here; an
# unpinned torch would pull a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q -e ".[dev,flower,paillier,he,docs,parquet]"
	touch $@

demo: setup
	$(BIN)/fedgraphrec demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -n 2 -q -m "not deploy"

test: lint typecheck unit

# The deployment tests: each starts a real SuperLink and SuperNodes (minutes each), so they run
# apart from `make test`; CI runs both.
test-deploy: setup
	$(BIN)/pytest -n 2 -q -m deploy

# The documentation site into site/; --strict fails on any broken link, reference or docstring.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site $(MKDOCS_FLAGS)

clean:
	rm -rf $(VENV) runs site .pytest_cache .mypy_cache .ruff_cache

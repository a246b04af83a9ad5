# The two commands of the README: `make demo` and `make test`. Both create the venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test check fmt clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	@echo "installing evidex and its test tools into $(VENV) (first run only)..."
	$(BIN)/python -m pip install --quiet -e '.[dev,service,postgres]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/evidex demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

check: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache

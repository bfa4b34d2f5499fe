#!/usr/bin/env bash
# The checks and measurements made on a lent GPU machine (docs/results.md, "On a GPU"), in one
# command, from the repository root, with a CUDA build of torch already installed:
#
#   OUT=/some/folder bash experiments/benchmarks/gpu_checks.sh
#
# 1. the CUDA tests (they skip on a machine without CUDA);
# 2. the paper-scale default runs (single, composition of 5) and K = 200 on the GPU
#    (game_phases.py --full --device cuda), each with the GPU's matmul measured in the same process;
# 3. `bngp evaluate --attacks all` at paper scale on the GPU (evaluation.py --device cuda).
# Everything is written under $OUT (reports, logs); bngp is installed without its dependencies
# (the machine has no network: msprime, opendp, ... are not needed by these commands).
set -u -o pipefail
OUT=${OUT:?set OUT to the output folder}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=8
PYTHON=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
git rev-parse --short HEAD 2>/dev/null || true
"$PYTHON" -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 \
    || { echo "pip install failed, see install.log"; tail -5 "$OUT/install.log"; exit 1; }
started=$(date +%s)
"$PYTHON" -m pytest -p no:cacheprovider -n0 -q tests/core/test_device.py tests/cli/test_cli_device.py \
    tests/core/test_timing.py 2>&1 | tee "$OUT/cuda_tests.log" | tail -15
echo "tests: $(( $(date +%s) - started )) s"
started=$(date +%s)
"$PYTHON" experiments/benchmarks/game_phases.py --full --sizes 800x5000,800x5000x5,200x1000 --device cuda \
    --threads 8 --out "$OUT" 2>&1 | grep '^\[game_phases\]\|Error\|error'
echo "game_phases: $(( $(date +%s) - started )) s"
started=$(date +%s)
"$PYTHON" experiments/benchmarks/evaluation.py --device cuda --threads 8 --out "$OUT" 2>&1 | tail -3
echo "evaluation: $(( $(date +%s) - started )) s"
ls "$OUT"

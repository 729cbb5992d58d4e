#!/usr/bin/env bash
# The GPU check, for a GPU host (a few minutes, nothing downloaded): the GPUs' identity, HBM
# bandwidth measured with torch where it is installed, NVML telemetry during that load, and the
# GPU engines installed in $STACKBOOK_CACHE. Writes benchmarks/results/gpu_check-<host>-<UTC>.json
# in the fixed format stackbook-gpu-check/1 (see benchmarks/gpu_check.py). Refuses where nvidia-smi
# lists no GPU.
#   benchmarks/gpu_check.sh [--load-seconds 20] [--buffer-gib 2]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "the GPU check needs an NVIDIA GPU; nvidia-smi finds none on this machine" >&2
  exit 3
fi
# The workbook's interpreter; torch, where a GPU engine's environment has it, measures the bandwidth.
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
out="$ROOT/benchmarks/results/gpu_check-$(hostname -s)-$(date -u +%Y%m%dT%H%M%SZ).json"
PYTHONPATH="$ROOT/lib${PYTHONPATH:+:$PYTHONPATH}" timeout 600 "$PY" "$ROOT/benchmarks/gpu_check.py" --out "$out" "$@"

#!/usr/bin/env bash
# The prepared GPU run (stackbook/gpu_campaign.py) from a checkout: on a CUDA machine with torch and
# transformers[serving], `bash benchmarks/gpu_campaign.sh` writes outputs/gpu-transformers/<run-id>/
# (exit 3 where there is no CUDA); `bash benchmarks/gpu_campaign.sh --device cpu` rehearses it here.
# PYTHON names the interpreter (default: the workbook's .venv, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
missing=$("$PY" - <<'PY'
import importlib.util as u
need = ("pydantic", "typer", "yaml", "papermill", "nbformat", "pandas", "scipy", "httpx", "torch", "transformers")
print(" ".join(n for n in need if u.find_spec(n) is None))
PY
)
if [ -n "$missing" ]; then
  echo "$PY lacks: $missing. Run make setup (it builds .venv), or set PYTHON to an interpreter that has them." >&2
  exit 2
fi
PYTHONPATH="lib${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m stackbook.cli gpu-campaign "$@"

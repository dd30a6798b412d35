#!/usr/bin/env bash
# Builds (installing what is missing, see scripts/setup.sh) and runs the whole test suite with CTest.
# Tests that read ../shared/data skip when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
CABERT_SETUP_TARGET=all bash scripts/setup.sh
cd "${CABERT_BUILD_DIR:-build}"
ctest --output-on-failure -j "${CABERT_JOBS:-$(nproc)}" "$@"

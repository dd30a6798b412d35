#!/usr/bin/env bash
# Builds cabert with AddressSanitizer and UndefinedBehaviorSanitizer (-DCABERT_SANITIZE, see
# cmake/CabertSanitize.cmake) in its own build directory and runs the tests under them: the whole GoogleTest
# suite (one shard per core; under the sanitizers it takes minutes, LibTorch itself not being instrumented)
# and the CLI tests but those labelled `long` (recipes and multi-process runs end to end, which the main suite
# runs; tests/CMakeLists.txt lists them). Any sanitizer
# report fails the run, also one from a child process whose exit code no test looks at: reports go to files,
# and there must be none.
#
#   bash scripts/sanitize.sh          # what CI runs (about 25 minutes on 2 cores, the build included)
#   bash scripts/sanitize.sh --all    # every test, recipes_test included, through CTest
#
# Environment: CABERT_SANITIZE_BUILD_DIR (default build-asan), CABERT_SANITIZE (default address,undefined),
# CABERT_SANITIZE_FILTER (a GoogleTest filter for the unit tests, default all), CABERT_JOBS (default: all
# cores).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${CABERT_SANITIZE_BUILD_DIR:-build-asan}
sanitizers=${CABERT_SANITIZE:-address,undefined}
jobs=${CABERT_JOBS:-$(nproc)}
all=0
[ "${1:-}" = --all ] && all=1

# Debian packages and the torch wheel; clang with its sanitizer runtimes (libclang-rt-14-dev) and its OpenMP
# runtime (libomp-14-dev, for the CPU kernels' parallel loops).
CABERT_SETUP_BUILD=0 CABERT_SETUP_PACKAGES="clang libclang-rt-14-dev libomp-14-dev" bash scripts/setup.sh
start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  # clang: its precompiled header carries LibTorch's template instantiations (CMake passes
  # -fpch-instantiate-templates), where GCC redoes them in every translation unit, about 7 s each even for an
  # empty one; measured here, clang compiles this project's units 2-2.7x faster than GCC, which halves the
  # build. -O1 -g1: the usual sanitizer optimisation and line tables for the reports. The wheel's CPU
  # libraries only (no CUDA toolkit needed).
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" \
        -DCABERT_SANITIZE="$sanitizers" -DCABERT_CUDA=OFF -DCABERT_PYTHON="$PWD/.venv/bin/python" >&2
fi
cmake --build "$build" -j "$jobs" >&2
built=$(date +%s)
echo "sanitize: built in $((built - start)) s" >&2

reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
# On top of the defaults built into the binaries (tests/sanitizer/defaults.cc): reports to files, and an
# exit code of their own.
export ASAN_OPTIONS="log_path=$reports/asan:exitcode=86${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$reports/ubsan:exitcode=86${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export OMP_WAIT_POLICY=PASSIVE

status=0
if [ "$all" = 1 ]; then
  ctest --test-dir "$build" --output-on-failure -j "$jobs" || status=$?
else
  # GoogleTest shards, one per job, in parallel (one process each: LibTorch starts once per shard).
  filter=${CABERT_SANITIZE_FILTER:-*}
  pids=()
  for ((shard = 0; shard < jobs; ++shard)); do
    GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard "$build/tests/cabert_tests" --gtest_filter="$filter" \
      --gtest_brief=1 >"$reports/unit.$shard.log" 2>&1 &
    pids+=($!)
  done
  for ((shard = 0; shard < jobs; ++shard)); do
    rc=0
    wait "${pids[$shard]}" || rc=$?
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? from .* ran' "$reports/unit.$shard.log" | sed "s/^/shard $shard: /" >&2 || true
    if [ "$rc" -ne 0 ]; then
      cat "$reports/unit.$shard.log" >&2
      status=1
    fi
  done
  echo "sanitize: unit tests in $(( $(date +%s) - built )) s" >&2
  ctest --test-dir "$build" --output-on-failure -j "$jobs" -L cli -LE long || status=$?
fi
echo "sanitize: tests in $(( $(date +%s) - built )) s, total $(( $(date +%s) - start )) s" >&2

for report in "$reports"/asan.* "$reports"/ubsan.*; do
  [ -f "$report" ] || continue
  if grep -qE 'ERROR: |runtime error: ' "$report"; then
    echo "sanitize: sanitizer report $report:" >&2
    cat "$report" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "sanitize: ok, no sanitizer reports" >&2
exit "$status"

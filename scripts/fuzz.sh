#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, with clang: -DCABERT_FUZZ=ON) and runs each for a bounded time
# from its seed corpus (tests/fuzz/corpus/<target>). Exits non-zero when any target finds something: a
# crash or sanitizer report, an exception other than cabert's expected one, an allocation over
# -malloc_limit_mb, an input that runs over -timeout. The input is kept in BUILD/findings/ (reproduce:
# BUILD/fuzz/<target> BUILD/findings/<file>).
#
#   bash scripts/fuzz.sh                          # every target, 60 s each
#   CABERT_FUZZ_SECONDS=3600 bash scripts/fuzz.sh record_file_fuzz   # one target, an hour
#
# Environment: CABERT_FUZZ_SECONDS (default 60, per target), CABERT_FUZZ_BUILD_DIR (default build-fuzz; the
# corpus each run grows stays in BUILD/corpus/<target> and seeds the next run), CABERT_FUZZ_JOBS (default 1:
# parallel libFuzzer workers per target, -fork=N), CABERT_JOBS (build jobs).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${CABERT_FUZZ_SECONDS:-60}
build=${CABERT_FUZZ_BUILD_DIR:-build-fuzz}
workers=${CABERT_FUZZ_JOBS:-1}
jobs=${CABERT_JOBS:-$(nproc)}

# clang and its libFuzzer runtime (Debian 12: clang-14; the runtime is libclang-rt-14-dev, only a
# "Recommends" of clang, hence named), with the other Debian packages (protobuf, zstd, nlohmann-json ...).
CABERT_SETUP_BUILD=0 CABERT_SETUP_PACKAGES="clang libclang-rt-14-dev" bash scripts/setup.sh

if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
        -DCMAKE_CXX_COMPILER=clang++ -DCABERT_FUZZ=ON >&2
fi
start=$(date +%s)
cmake --build "$build" -j "$jobs" >&2
echo "fuzz: built in $(( $(date +%s) - start )) s" >&2

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for binary in "$build"/fuzz/*_fuzz; do targets+=("$(basename "$binary")"); done
fi

mkdir -p "$build/findings" "$build/logs"
failed=()
printf '%-20s %10s %8s %s\n' target executions seconds result
for target in "${targets[@]}"; do
  [ -x "$build/fuzz/$target" ] || { echo "fuzz: no target $target in $build/fuzz" >&2; exit 2; }
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  log="$build/logs/$target.log"
  flags=(-max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len=16384
         -print_final_stats=1 -artifact_prefix="$build/findings/$target-")
  [ "$workers" -gt 1 ] && flags+=(-fork="$workers" -ignore_crashes=0)
  rc=0
  "$build/fuzz/$target" "${flags[@]}" "$corpus" "tests/fuzz/corpus/$target" >"$log" 2>&1 || rc=$?
  executions=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  if [ "$rc" -ne 0 ] || grep -qE '^(==[0-9]+== ?ERROR|SUMMARY: )' "$log"; then
    result="FINDING (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|unexpected' "$log" || true)"
    failed+=("$target")
  else
    result=ok
  fi
  printf '%-20s %10s %8s %s\n' "$target" "$executions" "$seconds" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}: inputs in $build/findings/, logs in $build/logs/" >&2
  exit 1
fi

#!/usr/bin/env bash
# `tokenize encode` and `build-corpus` wall times at --threads 1 and N, alternating, and a check that the
# records are the same (everything after the header, which names the command line and the time).
# Usage: bash recipes/bench/text_threads.sh CABERT INPUT.txt TOKENIZER.model OUTDIR [THREADS=2] [RUNS=3]
set -euo pipefail
cabert=$1 input=$2 model=$3 out=$4 threads=${5:-2} runs=${6:-3}
mkdir -p "$out"
bytes=$(stat -c %s "$input")

# The file from its first records frame on: skips the magic frame, the header's marker and the header frame.
records_digest() {
  python3 - "$1" <<'PY'
import hashlib, struct, sys
data = open(sys.argv[1], "rb").read()
pos = 8 + struct.unpack_from("<I", data, 4)[0]            # magic: a skippable frame
kind, count, compressed = struct.unpack_from("<IIQ", data, pos + 8)
assert kind == 1, "expected the header's marker"
pos += 8 + struct.unpack_from("<I", data, pos + 4)[0] + compressed
print(hashlib.sha256(data[pos:]).hexdigest())
PY
}

# The two cores are shared: each run waits until no compiler or test binary is running, and reports the CPU
# seconds it got (user + system) next to its wall time.
wait_quiet() {
  for _ in $(seq 1 120); do
    pgrep -f 'cc1plus|cabert_tests|cabert_gpu_tests|ctest' > /dev/null || return 0
    sleep 5
  done
}
seconds() {
  wait_quiet
  local start=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$out/cpu" "$@"
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  cpu=$(awk '{print $1 + $2}' "$out/cpu")
}

echo "| command | threads | run | wall s | CPU s | MB/s | records sha256 (first 12) |"
echo "|---|---:|---:|---:|---:|---:|---|"
for run in $(seq 1 "$runs"); do
  for t in 1 "$threads"; do
    seconds "$cabert" --threads "$t" -q tokenize encode -m "$model" -i "$input" -o "$out/tokens-$t.cbr"
    printf '| tokenize encode | %s | %s | %.2f | %.1f | %.1f | %s |\n' "$t" "$run" "$wall" "$cpu" \
      "$(echo "$bytes / $wall / 1000000" | bc -l)" "$(records_digest "$out/tokens-$t.cbr" | cut -c1-12)"
    seconds "$cabert" --threads "$t" -q build-corpus -m "$model" -i "$input" -o "$out/corpus-$t" --shards 4 \
      --max-length 128
    digests=$(for shard in "$out"/corpus-"$t"-0000?-of-00004; do records_digest "$shard" | cut -c1-6; done | paste -sd+)
    printf '| build-corpus --shards 4 --max-length 128 | %s | %s | %.2f | %.1f | %.1f | %s |\n' "$t" "$run" "$wall" \
      "$cpu" "$(echo "$bytes / $wall / 1000000" | bc -l)" "$digests"
  done
done

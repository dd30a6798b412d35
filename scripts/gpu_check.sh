#!/usr/bin/env bash
# The first-GPU check of issue 18, as one prepared command for a machine lent through the device tool (CUDA
# toolkit, CMake, ninja and a python3 with PyTorch there; no package registry): builds cabert against that
# PyTorch's LibTorch and the Debian packages scripts/gpu_kit.sh fetched into .gpu-kit, then runs, each step
# under what is left of the time budget:
#   1. `cabert selftest --device all`   (build, devices, kernel routes, every op against its reference)
#   2. `ctest -L gpu`                    (tests/gpu: every CUDA op against the CPU kernels, amp, streams, ...;
#                                         a test that crashes runs again under cuda-gdb for its backtrace)
#      and which shared object serves the executables' std::filesystem calls (LD_DEBUG bindings, summary.txt)
#   3. `cabert bench --device cuda`      (the conv and attention ops, forward + backward, fused vs reference;
#                                          the composite attention on both CUDA routes), then
#      `cabert bench --profile`          (where the time goes: device kernels and host calls per run, for the
#                                          composite attention on both routes and the conv ops at T=2048 K=31),
#      then the unit tests named *Cuda* (beam search on CUDA, ...), built after the steps above
#   4. recipes/bench/conv_ops.sh on cuda (cabert's conv ops beside fairseq's own CUDA kernels, HF ConvBERT and
#      torch at K = 15, 31: issue 18's 2x target), when the kit has fairseq's sources; fairseq's kernels are
#      compiled in the background while cabert builds
#   5. `cabert bench --model --device cuda` (bert-small-composite, convbert-small; float and --amp) and HF's
#      ConvBertForMaskedLM on the same model (recipes/bench/attention.sh, PARTS=models), into bench.md
# Logs (at most 8 files, as the device tool returns them) go to $OUT, or out/gpu-check elsewhere:
# summary.txt (versions, each step's exit code and seconds), build.log (configure and build), selftest.log,
# gpu-tests.log, bench.md, profiles.tar.gz (step 3's profiles: ROW.md summaries and Chrome traces), baselines.log
# (fairseq's build and step 4), comparison.md (step 4's table).
#
#   bash scripts/gpu_kit.sh                                                    # on the Debian machine, once
#   device run: command "bash scripts/gpu_check.sh", carry [".gpu-kit"], timeout_s 560
#
# Measured on an H200 (16 cores): configure 9 s, cabert + cabert_gpu_tests 132-142 s, ctest -L gpu 40-50 s, the
# benches and profiles under 30 s, cabert_tests 69 s; fairseq's kernels 436 s beside that, once more than 500 s.
# A second call reuses the build only if it comes within the machine's warm time (30 s): have it ready. A call
# for the baselines alone: GPU_CHECK_SKIP="selftest gpu-tests bench profile build-unit unit-cuda"
# GPU_CHECK_TARGETS=cabert.
#
# Environment: GPU_CHECK_SECONDS (530: the budget for all steps, kept under the call's timeout so that the logs
# come back), TORCH_CUDA_ARCH_LIST (default: the first GPU's compute capability, one architecture to compile),
# CABERT_JOBS (all cores), CABERT_CMAKE_ARGS (more configure arguments), GPU_CHECK_TARGETS (cabert
# cabert_gpu_tests), GPU_CHECK_BUILD_ONLY (set: stop after the builds; how the kit is checked without a GPU),
# GPU_CHECK_SKIP (step names to skip, e.g. "selftest gpu-tests" for a second call that only measures).
#
# The Debian packages are unpacked under /tmp/cabert-deps, never into /; of their shared libraries only those the
# machine lacks go on the library path (its own newer ones stay in use). A rerun on the same (warm) machine
# rebuilds only what changed. Checked on the Debian machine (no GPU), with /usr hidden from CMake and torch
# 2.11.0+cu130's LibTorch:
#   GPU_CHECK_BUILD_ONLY=1 CABERT_CMAKE_ARGS="-DTorch_DIR=<torch>/share/cmake/Torch -DCMAKE_IGNORE_PREFIX_PATH=/usr" \
#     bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu-check}
mkdir -p "$out"
budget=${GPU_CHECK_SECONDS:-530}
started=$(date +%s)
deps=/tmp/cabert-deps
build=build-gpu
jobs=${CABERT_JOBS:-$(nproc)}
summary="$out/summary.txt"
: > "$summary"

say() { echo "gpu_check: $*" | tee -a "$summary" >&2; }
left() { echo $((budget - ($(date +%s) - started))); }
# step NAME LOG COMMAND...: runs COMMAND with what is left of the budget (less 10 s for the logs), appends its
# output to LOG, records exit code and seconds; a step that finds under 20 s left is skipped.
step() {
  local name=$1 log=$2
  shift 2
  case " ${GPU_CHECK_SKIP:-} " in *" $name "*) say "$name: skipped (GPU_CHECK_SKIP)"; return 0 ;; esac
  local limit=$(($(left) - 10))
  if [ "$limit" -lt 20 ]; then
    say "$name: skipped, $((limit + 10)) s of the budget left"
    return 1
  fi
  local t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  say "$name: exit $rc in $(($(date +%s) - t0)) s$([ $rc = 124 ] && echo ' (out of budget)')"
  return $rc
}

if ! ls .gpu-kit/debs/*.deb > /dev/null 2>&1; then
  say "no .gpu-kit/debs: run scripts/gpu_kit.sh on the Debian machine and carry .gpu-kit"
  exit 2
fi
{
  echo "host: $(uname -srm), $(nproc) cores"
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "nvcc: $(nvcc --version 2>&1 | tail -n 2 | tr '\n' ' ')"
  echo "c++: $(c++ --version 2>&1 | head -n 1); cmake: $(cmake --version | head -n 1)"
  echo "python3: $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
} | tee -a "$summary" >&2

# The Debian packages, unpacked; pkg-config files pointed at their new prefix (cairo's private requirements
# are dropped: cabert compiles against cairo.h alone and links libcairo, whose dependencies it does not name).
# Done once per kit: a rerun on the same machine keeps the files' times, so the build stays incremental (protoc's
# wrapper is an input of every generated .pb.h).
lib="$deps/usr/lib/x86_64-linux-gnu"
kit_stamp=$(cat .gpu-kit/debs/*.deb | md5sum | cut -d' ' -f1)  # contents: a new download of the same keeps the build
if [ "$(cat "$deps/.kit-stamp" 2>/dev/null)" != "$kit_stamp" ]; then
  rm -rf "$deps"
  mkdir -p "$deps/bin"
  for deb in .gpu-kit/debs/*.deb; do dpkg-deb -x "$deb" "$deps"; done
  # Some packages (zlib1g, libexpat1) still ship their libraries under /lib, and -dev links point there by
  # absolute path: one library folder, with relative links.
  [ -d "$deps/lib/x86_64-linux-gnu" ] && cp -a "$deps/lib/x86_64-linux-gnu/." "$lib/"
  for link in "$lib"/*; do
    if [ -L "$link" ] && [[ "$(readlink "$link")" == /* ]]; then ln -sfn "$(basename "$(readlink "$link")")" "$link"; fi
  done
  for pc in "$lib"/pkgconfig/*.pc "$deps"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i -e "s|=/usr|=$deps/usr|g" -e "s| -I/usr| -I$deps/usr|g" "$pc"
  done
  sed -i '/^Requires.private:/d' "$lib/pkgconfig/cairo.pc"
  # protoc and pkgconf run with the kit's libraries; everything else keeps the machine's.
  for tool in protoc pkgconf; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$deps/usr/bin/$tool" > "$deps/bin/$tool"
    chmod +x "$deps/bin/$tool"
  done
  echo "$kit_stamp" > "$deps/.kit-stamp"
fi
rm -rf "$deps/runtime-lib"
mkdir -p "$deps/runtime-lib"
# Shared libraries the machine has no copy of (by soname) are what cabert's binaries need from the kit.
known=$(ldconfig -p 2>/dev/null | awk '{print $1}')
missing=()
for so in "$lib"/*.so.*; do
  name=$(basename "$so")
  [[ "$name" =~ \.so\.[0-9]+$ ]] || continue
  if ! grep -qxF "$name" <<< "$known"; then
    ln -sf "$so" "$deps/runtime-lib/$name"
    missing+=("$name")
  fi
done
say "from the kit at run time: ${missing[*]:-nothing}"
export PKG_CONFIG_PATH="$lib/pkgconfig:$deps/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# The machine's pkg-config where it has one, else the kit's pkgconf (with the kit's libpkgconf).
pkg_config=$(command -v pkg-config || echo "$deps/bin/pkgconf")
say "pkg-config: $pkg_config"
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
  export TORCH_CUDA_ARCH_LIST
fi
say "TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-unset}"

# fairseq's CUDA kernels, when the kit has their sources (scripts/gpu_kit.sh): fairseq 0.12.2's source
# distribution unpacked under /tmp/cabert-fairseq with the kernels' own sources over it, the kernels generated
# (cuda_function_gen.py) and compiled in place for TORCH_CUDA_ARCH_LIST, in the background while cabert builds;
# a rerun keeps what was built. fairseq's sources predate CUDA 13: cuda_utils.cu uses SHFL_MASK, which only
# dynamicconv's header defines, and std::cout without <iostream>; nvcc's NVCC_APPEND_FLAGS supplies both. One line
# of each generator is changed: its list of kernel sizes (3 .. 255) becomes the sizes the baselines measure
# (GPU_CHECK_BASELINE_KERNELS, 15,31), so that the build instantiates a quarter of the templates (the kernels' code
# is untouched; a size left out makes fairseq print "Unsupported filter length" and skip, so the two lists are one
# variable). The full build took 436 s and once more than 500 s beside cabert's on 16 cores.
baseline_kernels=${GPU_CHECK_BASELINE_KERNELS:-15,31}
fairseq_src=/tmp/cabert-fairseq/fairseq-0.12.2
fairseq_layers="$fairseq_src/fairseq/modules/lightconv_layer:$fairseq_src/fairseq/modules/dynamicconv_layer"
build_fairseq() {
  if [ ! -f "$fairseq_src/fairseq/modules/cuda_utils.cu" ]; then  # the layers' sources are the kit's last step
    rm -rf /tmp/cabert-fairseq && mkdir -p /tmp/cabert-fairseq &&
      tar -xzf .gpu-kit/fairseq/fairseq-0.12.2.tar.gz -C /tmp/cabert-fairseq &&
      tar -xf .gpu-kit/fairseq/cuda-layers.tar -C "$fairseq_src" || return 1
  fi
  local layer
  for layer in lightconv dynamicconv; do
    ls "$fairseq_src/fairseq/modules/${layer}_layer/${layer}_cuda"*.so > /dev/null 2>&1 && continue
    (cd "$fairseq_src/fairseq/modules/${layer}_layer" &&
      sed -i "s/^    kernels = \[3, 5, 7, 15, 31, 63, 127, 255\]\$/    kernels = [$baseline_kernels]/" cuda_function_gen.py &&
      grep -q "^    kernels = \[$baseline_kernels\]\$" cuda_function_gen.py && python3 cuda_function_gen.py &&
      NVCC_APPEND_FLAGS="-DSHFL_MASK=0xffffffff -include iostream" MAX_JOBS=$jobs \
        python3 setup.py build_ext --inplace) || return 1
  done
}
fairseq_pid=""
if [ -f .gpu-kit/fairseq/cuda-layers.tar ]; then
  fairseq_started=$(date +%s)
  build_fairseq > /tmp/cabert-fairseq-build.log 2>&1 &  # megabytes of compiler warnings: only its end is kept
  fairseq_pid=$!
else
  say "fairseq: not in the kit, its CUDA kernels' rows are left out"
fi
# Waits for fairseq's build (while the budget lasts) and records how it ended.
fairseq_built=no
await_fairseq() {
  [ -n "$fairseq_pid" ] || return 0
  while kill -0 "$fairseq_pid" 2> /dev/null && [ "$(left)" -gt 30 ]; do sleep 5; done
  if kill -0 "$fairseq_pid" 2> /dev/null; then
    say "fairseq build: still running, out of budget (a rerun on this machine goes on from where it stopped)"
  else
    wait "$fairseq_pid"
    local rc=$?
    say "fairseq build: exit $rc, done within $(($(date +%s) - fairseq_started)) s of its start" \
      "(its last lines: baselines.log)"
    { echo "== fairseq build: exit $rc; the last 30 lines of /tmp/cabert-fairseq-build.log"
      tail -n 30 /tmp/cabert-fairseq-build.log; } >> "$out/baselines.log"
    [ $rc = 0 ] && fairseq_built=yes
  fi
  fairseq_pid=""
}

step configure "$out/build.log" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCABERT_CUDA=ON -DCABERT_PYTHON="$(command -v python3)" -DCMAKE_PREFIX_PATH="$deps/usr" \
  -DProtobuf_PROTOC_EXECUTABLE="$deps/bin/protoc" -DPKG_CONFIG_EXECUTABLE="$pkg_config" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$lib" ${CABERT_CMAKE_ARGS:-} || exit 1
# shellcheck disable=SC2086  # GPU_CHECK_TARGETS is a list of targets
step build "$out/build.log" cmake --build "$build" -j "$jobs" --target ${GPU_CHECK_TARGETS:-cabert cabert_gpu_tests} ||
  exit 1
if [ -n "${GPU_CHECK_BUILD_ONLY:-}" ]; then
  await_fairseq
  exit 0
fi

export LD_LIBRARY_PATH="$deps/runtime-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_WAIT_POLICY=passive
step selftest "$out/selftest.log" "$build/bin/cabert" selftest --device all
# The composite attention's tiled CUDA kernels (--cuda-attention tiles), which have not run on a GPU before.
step selftest "$out/selftest.log" "$build/bin/cabert" --cuda-attention tiles selftest --device all
step gpu-tests "$out/gpu-tests.log" ctest --test-dir "$build" -L gpu --output-on-failure
# A test that crashed (ctest: "Exception: SegFault" and the like) runs again under cuda-gdb for its backtrace
# (cuda-gdb also debugs host code; the machines have no gdb), appended to gpu-tests.log.
crash_line='s/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([A-Za-z0-9_.]*\) .*\*\*\*Exception:.*/\1/p'
crashed=$(sed -n "$crash_line" "$out/gpu-tests.log" 2> /dev/null)
cuda_gdb=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2> /dev/null | head -n 1)
for test in $crashed; do
  [ -n "$cuda_gdb" ] || { say "no cuda-gdb: no backtrace of $test"; break; }
  echo "== $test under cuda-gdb" >> "$out/gpu-tests.log"
  step backtrace "$out/gpu-tests.log" "$cuda_gdb" -batch -ex run -ex "thread apply all bt 30" \
    --args "$build/tests/cabert_gpu_tests" --gtest_filter="$test"
done
# Which shared object serves the executables' std::filesystem calls (the wheel's LibTorch exports a copy of its
# own; the link puts libstdc++ before it): the dynamic linker's bindings, all resolved at start (LD_BIND_NOW),
# written to files of their own (LD_DEBUG_OUTPUT, apart from the program's stderr), counted by the object they
# bind to, into summary.txt with the program's exit code (an empty count with a non-zero exit: it did not start).
filesystem_bindings() {
  local trace=/tmp/cabert-bindings
  rm -f "$trace".*
  LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$trace" "$@" > /dev/null 2> /tmp/cabert-bindings-stderr
  local rc=$?
  grep -h "binding file $1 .*filesystem" "$trace".* 2> /dev/null | sed -n 's/.* to \([^ ]*\) .*/\1/p' | sort |
    uniq -c | tr -s ' ' | tr '\n' ';'
  echo " (exit $rc; $(cat "$trace".* 2> /dev/null | wc -l) binding lines in all$([ $rc = 0 ] ||
    echo "; stderr: $(tail -n 2 /tmp/cabert-bindings-stderr | tr '\n' ' ')"))"
}
for binary in "$build/bin/cabert --version" "$build/tests/cabert_gpu_tests --gtest_list_tests"; do
  # shellcheck disable=SC2086  # the binary and its arguments
  say "std::filesystem of ${binary%% *} bound to: $(filesystem_bindings $binary)"
done
step bench "$out/bench.md" "$build/bin/cabert" bench --device cuda --op lightconv,dynamicconv,sdconv,relpos \
  --seq 512,2048 --kernel 3,17,31 --batch 8 --channels 256 --heads 4 --backward --repeats 10 --warmup 2
# The tiled CUDA kernels beside SDPA on plain attention (the issue's target: at least as fast from T=512 on).
step bench "$out/bench.md" "$build/bin/cabert" --cuda-attention tiles bench --device cuda \
  --op composite-attention,sdpa --kernels fused --seq 512,2048,8192 --kernel 17 --batch 8 --channels 256 --heads 4 \
  --backward --repeats 5 --warmup 1
# The composite attention's regions route beside the reference (the T x T scores) and SDPA: T=1024 is where
# --cuda-attention auto switches from the scores to the regions at this B and H (kernels/attention_kernels.h).
step bench "$out/bench.md" "$build/bin/cabert" --cuda-attention regions bench --device cuda \
  --op composite-attention,sdpa,attention --seq 512,1024,2048 --kernel 17 --batch 8 --channels 256 --heads 4 \
  --backward --repeats 10 --warmup 2
step bench "$out/bench.md" "$build/bin/cabert" --cuda-attention regions bench --device cuda \
  --op composite-attention,sdpa --kernels fused --seq 8192 --kernel 17 --batch 8 --channels 256 --heads 4 \
  --backward --repeats 5 --warmup 1
# The default route (auto) on the fused path: the scores up to T=1024 here, the regions beyond.
step bench "$out/bench.md" "$build/bin/cabert" bench --device cuda --op composite-attention --kernels fused \
  --seq 128,512,1024,2048 --kernel 17 --batch 8 --channels 256 --heads 4 --backward --repeats 10 --warmup 2
# The composite attention's other CUDA route (blocks of query rows), side by side with the regions above.
step bench "$out/bench.md" "$build/bin/cabert" --cuda-attention blocks bench --device cuda --op composite-attention \
  --kernels fused --seq 512,2048,8192 --kernel 17 --batch 8 --channels 256 --heads 4 --backward --repeats 5 --warmup 1

# Where the time goes (bench --profile), the rows' summaries and traces packed into one file of $out.
profiles=/tmp/cabert-profiles
rm -rf "$profiles"
step profile "$out/bench.md" "$build/bin/cabert" --cuda-attention regions bench --device cuda \
  --op composite-attention,sdpa --kernels fused --seq 512,2048 --kernel 17 --batch 8 --channels 256 --heads 4 \
  --backward --repeats 3 --warmup 2 --profile "$profiles/regions"
step profile "$out/bench.md" "$build/bin/cabert" --cuda-attention blocks bench --device cuda \
  --op composite-attention --kernels fused --seq 512,2048 --kernel 17 --batch 8 --channels 256 --heads 4 \
  --backward --repeats 3 --warmup 2 --profile "$profiles/blocks"
step profile "$out/bench.md" "$build/bin/cabert" --cuda-attention tiles bench --device cuda \
  --op composite-attention --kernels fused --seq 512,2048 --kernel 17 --batch 8 --channels 256 --heads 4 \
  --backward --repeats 3 --warmup 2 --profile "$profiles/tiles"
step profile "$out/bench.md" "$build/bin/cabert" bench --device cuda --op lightconv,dynamicconv,sdconv \
  --kernels fused --seq 2048 --kernel 31 --batch 8 --channels 256 --heads 4 --backward --repeats 3 --warmup 2 \
  --profile "$profiles/conv"
[ -d "$profiles" ] && tar -czf "$out/profiles.tar.gz" -C "$(dirname "$profiles")" "$(basename "$profiles")"

# The unit tests that take a CUDA device when there is one (beam search on CUDA, ...): built after the steps
# above, so that a failure here costs them nothing.
step build-unit "$out/build.log" cmake --build "$build" -j "$jobs" --target cabert_tests &&
  step unit-cuda "$out/gpu-tests.log" "$build/tests/cabert_tests" --gtest_filter='*Cuda*:*CUDA*:Linking.*'

await_fairseq
# The public rows: HF ConvBERT and torch always; fairseq's conv1d row with its sources, its CUDA kernels once built.
rows=hf-convbert-selfattn,torch-mha
[ -f .gpu-kit/fairseq/cuda-layers.tar ] && rows="fairseq-lightconv-conv1d,$rows"
[ "$fairseq_built" = yes ] && rows="fairseq-lightconv-cuda,fairseq-dynamicconv-cuda,$rows"
[ -d "$fairseq_src" ] || fairseq_src=""
if step baselines "$out/baselines.log" env PYTHON=python3 PYTHONPATH="$fairseq_layers${PYTHONPATH:+:$PYTHONPATH}" \
  FAIRSEQ_SRC="$fairseq_src" DEVICE=cuda KERNELS="$baseline_kernels" SEQS=512,2048 ATTENTION_SEQS=512,2048 REPEATS=10 WARMUP=3 \
  TARGET=2 ROWS="$rows" CABERT_BUILD_DIR="$build" bash recipes/bench/conv_ops.sh /tmp/cabert-conv-ops; then
  cp /tmp/cabert-conv-ops/comparison.md "$out/comparison.md"
fi
# Whole models on the device, float and bfloat16 autocast (bench --model --device cuda, timed by CUDA events)
# beside HF's ConvBertForMaskedLM on an export of the same convbert-small (recipes/bench/attention.sh's model
# half): issue 16's model rows on a GPU. Last, so that the checks above come first within the budget.
step models "$out/bench.md" env DEVICE=cuda PARTS=models AMP=1 REPEATS=5 PYTHON=python3 CABERT_BUILD_DIR="$build" \
  bash recipes/bench/attention.sh /tmp/cabert-attention
say "done in $(($(date +%s) - started)) s of $budget"

# cabert selftest (issue 18, part 3): the build line, the devices, a kernel path for every op, every check ok and
# exit 0 on this machine; a CUDA request on a machine without one is a usage error.
source "$(dirname "$0")/lib.sh"
"$CABERT" selftest --device cpu > "$work/selftest.out" 2> "$work/selftest.err" || fail "selftest: $(cat "$work/selftest.out" "$work/selftest.err")"
grep -q "^build: LibTorch .*CPU kernels vectorised for " "$work/selftest.out" || fail "no build line: $(cat "$work/selftest.out")"
grep -q "^  cpu: " "$work/selftest.out" || fail "no CPU device line"
for op in lightconv dynamicconv sdconv sdconv-branch relpos convbert-attention depthwise composite-attention dropout; do
  grep -q "^  $op on cpu: " "$work/selftest.out" || fail "no kernel path for $op"
  grep -q "^  ok    $op on cpu vs reference on the same device: max relative error " "$work/selftest.out" \
    || fail "no passing check for $op: $(cat "$work/selftest.out")"
done
grep -q "^selftest: all 9 checks passed in " "$work/selftest.out" || fail "no summary: $(cat "$work/selftest.out")"
if ! "$CABERT" selftest --device all 2>/dev/null | grep "^  cuda:0" > /dev/null; then
  expect_exit 2 "--device cuda: this machine has no CUDA device" "$CABERT" selftest --device cuda
  # bench times ops on a CUDA device (issue 18, part 4); without one it is a usage error before any timing,
  # naming what is missing first: the build's CUDA kernels (scripts/sanitize.sh builds without them), else a device.
  if grep "^build: .*CUDA kernels: yes" "$work/selftest.out" > /dev/null; then
    missing="--device cuda:0: no CUDA device is available here"
  else
    missing="--device cuda: a CUDA tensor reached a cabert built without CUDA kernels"
  fi
  expect_exit 2 "$missing" "$CABERT" bench --op lightconv --device cuda:0
fi

echo "selftest: ok"

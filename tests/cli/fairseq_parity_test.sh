# Parity with fairseq 0.12.2's own modules (docs/fairseq-parity.md): tests/python/fairseq_reference.py runs
# fairseq's LightweightConv1dTBC, DynamicConv1dTBC and MultiheadAttention from PyPI's source distribution on
# fixed weights, and the FairseqParity gtests (tests/unit/models/fairseq_parity_test.cc) check that cabert's
# modules give the same outputs to 1e-10. Skipped (exit 77) without the sdist ($CABERT_FAIRSEQ_SDIST, else
# build/fairseq-sdist/fairseq-0.12.2.tar.gz, which scripts/setup.sh fetches when online) or without a Python
# that has torch and safetensors ($CABERT_PYTHON).
source "$(dirname "$0")/lib.sh"
sdist=${CABERT_FAIRSEQ_SDIST:-$CABERT_SOURCE_DIR/build/fairseq-sdist/fairseq-0.12.2.tar.gz}
python=${CABERT_PYTHON:-}
if [ ! -s "$sdist" ]; then
  echo "skipped: no fairseq sdist at $sdist (scripts/setup.sh fetches it when online)"
  exit 77
fi
if [ -z "$python" ] || ! "$python" -c 'import torch, safetensors' 2> /dev/null; then
  echo "skipped: CABERT_PYTHON unset or without torch and safetensors"
  exit 77
fi
tests_binary="$(dirname "$CABERT")/../tests/cabert_tests"
[ -x "$tests_binary" ] || fail "no gtest binary at $tests_binary (build the target cabert_tests)"
"$python" "$CABERT_SOURCE_DIR/tests/python/fairseq_reference.py" "$sdist" "$work/fairseq.safetensors" \
  || fail "fairseq_reference.py failed"
CABERT_FAIRSEQ_REFERENCE="$work/fairseq.safetensors" "$tests_binary" --gtest_filter='FairseqParity.*' \
  > "$work/gtest.out" 2>&1 || fail "cabert differs from fairseq: $(cat "$work/gtest.out")"
grep -q "\[  PASSED  \] 5 tests" "$work/gtest.out" || fail "expected 5 parity tests to pass: $(cat "$work/gtest.out")"
grep -q "SKIPPED" "$work/gtest.out" && fail "a parity test skipped: $(cat "$work/gtest.out")"
echo "cabert equals fairseq 0.12.2's modules: $(grep -c '^\[       OK \]' "$work/gtest.out") tests"

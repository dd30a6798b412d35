# cabert bench --profile: after each row's timing, a summary and a Chrome trace named after the row (ops, and
# whole models' training steps); the fused ops' forwards are named ranges in it; bad values are usage errors.
source "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
"$CABERT" -q bench --op lightconv --seq 16 --kernel 3 --batch 2 --channels 8 --heads 2 --backward --repeats 1 \
  --warmup 0 --profile "$work/ops" --profile-runs 2 > "$work/table" 2> "$work/err" ||
  fail "bench --profile: $(cat "$work/err")"
for path in reference fused; do
  stem="$work/ops/lightconv-$path-fwdbwd-B2-T16-C8-H2-K3"
  [ -s "$stem.md" ] && [ -s "$stem.trace.json" ] || fail "no profile of the $path row: $(ls "$work/ops")"
  grep -q "^2 runs under PyTorch's profiler" "$stem.md" || fail "runs not as asked: $(head -5 "$stem.md")"
done
[ "$(ls -A "$work/ops" | wc -l)" = 4 ] || fail "more than the rows' files (temporaries left?): $(ls -A "$work/ops")"
fused="$work/ops/lightconv-fused-fwdbwd-B2-T16-C8-H2-K3.md"
grep -q "^| cabert::lightweight_conv | 1 | 1 | " "$fused" ||
  fail "the fused forward is no top-level range: $(cat "$fused")"
grep -q "CppNode<cabert::ops::(anonymous namespace)::LightweightConvFunction> | 1 | 0 | " "$fused" ||
  fail "no backward node in the fused profile"
! grep -q "cabert::lightweight_conv" "$work/ops/lightconv-reference-fwdbwd-B2-T16-C8-H2-K3.md" ||
  fail "the reference row ran the fused op"
grep -q "^| lightconv | fused | fwd+bwd | 2 | 16 | " "$work/table" ||
  fail "the table lost its rows: $(cat "$work/table")"

"$CABERT" -q bench --model bert-tiny-composite --seq 16 --batch 2 --kernels fused --repeats 1 --warmup 0 \
  --profile "$work/model" --profile-runs 1 > /dev/null 2> "$work/err" ||
  fail "bench --model --profile: $(cat "$work/err")"
summary="$work/model/bert-tiny-composite-fused-train-B2-T16.md"
[ -s "$summary" ] || fail "no profile of the training step: $(ls "$work/model")"
grep -q "^| cabert::relative_attention | 2 | 2 | " "$summary" ||
  fail "two layers' fused attention not counted: $(cat "$summary")"

"$CABERT" -q bench --model wu-lightconv-tiny --seq 16 --batch 2 --kernels fused --repeats 1 --warmup 0 \
  --profile "$work/seq2seq" --profile-runs 1 > /dev/null 2> "$work/err" ||
  fail "encoder-decoder --profile: $(cat "$work/err")"
for what in train generate; do
  [ -s "$work/seq2seq/wu-lightconv-tiny-fused-$what-B2-L16.md" ] || fail "no $what profile: $(ls "$work/seq2seq")"
done

expect_exit 2 "--profile-runs" "$CABERT" bench --op lightconv --profile "$work/x" --profile-runs 0
# A bad size or count anywhere in the lists is refused before the first row runs (the earlier rows ran and their
# records were lost), naming the option.
expect_exit 2 "--seq: expected a positive number, got 0" "$CABERT" bench --op lightconv --seq 16,0 --kernel 3 \
  --batch 2 --channels 8 --heads 2 --repeats 1 -o "$work/part.cabert"
[ ! -s "$work/out" ] && [ ! -e "$work/part.cabert" ] || fail "rows ran before the refusal: $(cat "$work/out")"
expect_exit 2 "--repeats: expected a positive number, got 0" "$CABERT" bench --model bert-tiny-none --repeats 0
expect_exit 2 "--set: changes the model of --model" "$CABERT" bench --op lightconv --set num_layers=1
echo "bench_profile: ok"

# --tensorboard DIR (issue 61 item 1): the event files of pretrain, finetune (SST-2) and translation, read with the
# `tensorboard` package's own EventAccumulator, hold every record of metrics.cabert under its tag and step with its
# value (float32), the run's options and model config as text, and the learned kernels as PNG images at every
# evaluation (pretrain) or epoch (finetune, translation); TensorBoard reads a running job, and after a kill -9 and
# --resume (pretrain and finetune) each step once with the resumed run's values; `export --metrics --tensorboard` gives the same scalars. Skipped (77)
# when $CABERT_PYTHON lacks the package (scripts/setup.sh installs it).
source "$(dirname "$0")/lib.sh"
python=${CABERT_PYTHON:-}
if [ -z "$python" ] || ! "$python" -c "import tensorboard" 2> /dev/null; then
  echo "skipped: CABERT_PYTHON unset or without the tensorboard package"
  exit 77
fi

# check_events EVENTS_DIR METRICS_JSON [min_train_steps]: the scalars equal the records (inspect --json lines).
# With min_train_steps (a running job), it only answers whether TensorBoard reads train/loss up to that step yet
# (steps increasing, each once).
check_events() {
  local probe=0
  [ -n "${3:-}" ] && probe=1
  "$python" - "$@" <<'PY' 2> "$work/check.err" && return 0

import json, struct, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={'scalars': 0, 'tensors': 0, 'images': 0})
acc.Reload()
f32 = lambda v: struct.unpack('f', struct.pack('f', v))[0]
expected = {}
epoch_steps = set()
for line in open(sys.argv[2]):
    r = json.loads(line)
    step = int(r.get('step', 0))
    if 'phase' in r:
        for name, value in r['values'].items():
            expected.setdefault(r['phase'] + '/' + name, {})[step] = f32(value)
    elif r.get('kind') == 'TRAIN':
        expected.setdefault('train/loss', {})[step] = f32(r['train_loss'])
    elif r.get('kind') == 'EPOCH':
        epoch_steps.add(step)
        for name, value in r['metrics'].items():
            expected.setdefault('dev/%s/%s' % (r['task'], name), {})[step] = f32(value)
        expected.setdefault('dev/%s/score' % r['task'], {})[step] = f32(r.get('score', 0.0))  # (JSON leaves out a score of 0)
        expected.setdefault('train/epoch_loss', {})[step] = f32(r['train_loss'])
if len(sys.argv) > 3 and sys.argv[3]:  # a running job: the records read so far are a prefix of the events
    n = int(sys.argv[3])
    got = [e.step for e in acc.Scalars('train/loss')] if 'train/loss' in acc.Tags()['scalars'] else []
    sys.exit(0 if got and got[-1] >= n and got == sorted(set(got)) else 1)
assert sorted(acc.Tags()['scalars']) == sorted(expected), (sorted(acc.Tags()['scalars']), sorted(expected))
for tag, steps in expected.items():
    got = [(e.step, e.value) for e in acc.Scalars(tag)]
    assert got == sorted(steps.items()), (tag, got, sorted(steps.items()))
eval_steps = sorted({step for tag, steps in expected.items() if tag.startswith('eval/') for step in steps})
if len(sys.argv) > 4 and sys.argv[4] == 'live-epochs':
    eval_steps = sorted(epoch_steps)  # a fine-tuning or translation: its learned kernels after every epoch
images = acc.Tags()['images']
if len(sys.argv) > 4 and eval_steps:  # a live run: its learned kernels at every evaluation
    assert len(sys.argv) < 6 or sys.argv[5] in images, images
    for tag in images:
        events = acc.Images(tag)
        assert [e.step for e in events] == eval_steps, (tag, [e.step for e in events], eval_steps)
        for e in events:
            png = e.encoded_image_string
            assert png[:8] == b'\x89PNG\r\n\x1a\n' and struct.unpack('>II', png[16:24]) == (e.width, e.height), tag
else:
    assert not images, images
text = acc.Tensors('run/options')[-1].tensor_proto.string_val[0].decode()
assert text.startswith('cabert ') and ('Model config' in text) == (len(sys.argv) > 4), text
print('ok', len(expected), 'tags')
PY
  [ "$probe" = 1 ] && return 1
  fail "$(cat "$work/check.err")"
}

train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 32 -o "$work/corpus"
run=(pretrain --preset bert-tiny-composite --corpus "$work/corpus" --model-dir "$work/pt" --batch-size 4
     --save-every 5 --eval-every 5 --threads 1 --tensorboard "$work/tb/pt")

"$CABERT" -q "${run[@]}" --steps 100000 &
pid=$!
seen=0
for _ in $(seq 1 300); do
  if [ -d "$work/tb/pt" ] && check_events "$work/tb/pt" /dev/null 12; then seen=1; break; fi
  kill -0 "$pid" 2> /dev/null || fail "the run ended before its events could be read"
  sleep 0.2
done
[ "$seen" = 1 ] || fail "TensorBoard did not read train/loss up to step 12 while the run went on"
kill -9 "$pid"
wait "$pid" 2> /dev/null || true

checkpoint=$(ls "$work/pt"/checkpoint-*.cabert | tail -n 1)
at=$((10#$(basename "$checkpoint" .cabert | sed 's/checkpoint-//')))
"$CABERT" -q "${run[@]}" --resume --steps $((at + 7)) 2> "$work/resume.err" || fail "resume: $(cat "$work/resume.err")"
[ "$(ls "$work/tb/pt" | grep -c tfevents)" = 2 ] || fail "expected two event files: $(ls "$work/tb/pt")"
"$CABERT" inspect --json --limit -1 "$work/pt/metrics.cabert" | grep '"phase"' > "$work/pt.json"
check_events "$work/tb/pt" "$work/pt.json" "" live pictures/relative_kernels > /dev/null

"$CABERT" -q export --metrics "$work/pt/metrics.cabert" --tensorboard "$work/exported"
check_events "$work/exported/pt" "$work/pt.json" > /dev/null

head -n 101 "$sample/SST-2/train.tsv" > "$work/train.tsv"
head -n 31 "$sample/SST-2/dev.tsv" > "$work/dev.tsv"
"$CABERT" -q finetune --init "$checkpoint" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" --epochs 2 \
  --batch-size 10 --log-every 4 --model-dir "$work/ft" --tensorboard "$work/tb/ft" > /dev/null
"$CABERT" inspect --json --limit -1 "$work/ft/metrics.cabert" | grep '"kind"' > "$work/ft.json"
check_events "$work/tb/ft" "$work/ft.json" "" live-epochs pictures/relative_kernels > /dev/null

# A fine-tuning killed outright in an epoch (after its 14th step, so last.cabert is at an epoch's end) and resumed
# for two more epochs: the curves hold each step once, with the resumed run's values.
ft_run=(finetune --init "$checkpoint" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" --batch-size 10
        --log-every 2 --model-dir "$work/ft2" --tensorboard "$work/tb/ft2" --threads 1)
"$CABERT" -q "${ft_run[@]}" --epochs 200 > /dev/null &
pid=$!
seen=0
for _ in $(seq 1 600); do
  if [ -d "$work/tb/ft2" ] && check_events "$work/tb/ft2" /dev/null 14; then seen=1; break; fi
  kill -0 "$pid" 2> /dev/null || fail "the fine-tuning ended before its events could be read"
  sleep 0.1
done
[ "$seen" = 1 ] || fail "TensorBoard did not read the fine-tuning's train/loss up to step 14 while it ran"
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
epochs=$("$CABERT" inspect --json --limit -1 "$work/ft2/metrics.cabert" | grep -c '"EPOCH"' || true)
[ "$epochs" -ge 1 ] && [ "$epochs" -lt 200 ] || fail "the killed fine-tuning recorded $epochs epochs"
"$CABERT" -q "${ft_run[@]}" --epochs $((epochs + 2)) --resume > /dev/null 2> "$work/ft_resume.err" \
  || fail "resume: $(cat "$work/ft_resume.err")"
[ "$(ls "$work/tb/ft2" | grep -c tfevents)" = 2 ] || fail "expected two event files: $(ls "$work/tb/ft2")"
"$CABERT" inspect --json --limit -1 "$work/ft2/metrics.cabert" | grep '"kind"' > "$work/ft2.json"
check_events "$work/tb/ft2" "$work/ft2.json" "" live-epochs pictures/relative_kernels > /dev/null
best=$("$python" -c "
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1]); acc.Reload()
print(acc.Tensors('best/SST-2')[0].tensor_proto.string_val[0].decode())" "$work/tb/ft" 2> /dev/null)
case "$best" in "run 1 (seed 42): epoch "*) ;; *) fail "best/SST-2 text: '$best'" ;; esac

# translation (the text-to-text path of finetune): its records likewise.
slice="$CABERT_SOURCE_DIR/tests/data/mt/multi30k-slice"
cat "$slice/train.de" "$slice/train.en" |
  "$CABERT" -q tokenize train -i - --vocab-size 300 --sentinels 4 --model-prefix "$work/joint"
paste "$slice/test.de" "$slice/test.en" | sed -n 1,20p > "$work/mt_dev.tsv"
"$CABERT" -q finetune --task translation --preset wu-lightconv-tiny --tokenizer "$work/joint.model" \
  --data "$slice" --dev "$work/mt_dev.tsv" --epochs 2 --lr 3e-3 --max-tokens 1500 --log-every 2 \
  --model-dir "$work/mt" --tensorboard "$work/tb/mt" > /dev/null
"$CABERT" inspect --json --limit -1 "$work/mt/metrics.cabert" | grep '"kind"' > "$work/mt.json"
check_events "$work/tb/mt" "$work/mt.json" "" live-epochs pictures/lightconv_kernels > /dev/null
echo "tensorboard_test: ok"

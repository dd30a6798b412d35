# A job of 2 "nodes" started with torchrun's own multi-node options (two torchrun agents on this machine, each
# --nnodes 2 --node-rank R --nproc-per-node 1, a static rendezvous on 127.0.0.1) trains like a local 2-process
# job (--nproc 2) and resumes like one: a 2-epoch translation run continued with --resume to 3 epochs gives the
# local 3-epoch run's losses, every record bit for bit. Skipped (77) without the torch wheel's torchrun beside
# $CABERT_PYTHON. Then the data-parallel scaling recipe with NNODES=2: node 0's `make scaling` and node 1's
# `make join` make one 2-process run, and its table row says so.
source "$(dirname "$0")/lib.sh"
torchrun="$(dirname "${CABERT_PYTHON:-/nonexistent/python}")/torchrun"
if [ ! -x "$torchrun" ]; then
  echo "skipped: no torchrun beside CABERT_PYTHON (scripts/setup.sh installs the torch wheel)"
  exit 77
fi
"$CABERT" -q tokenize train -i "$sample/gutenberg/11-0.txt" --input-format gutenberg --vocab-size 600 \
  --model-prefix "$work/tok"
train=("$CABERT" --threads 1 finetune --task translation --preset wu-lightconv-tiny --set dropout=0
  --set attention_dropout=0 --set conv_block.weight_dropout=0 --tokenizer "$work/tok.model"
  --data "$CABERT_SOURCE_DIR/tests/data/mt/multi30k-slice" --dev-split test --max-train-examples 64
  --max-dev-examples 8 --lr 3e-3 --warmup-steps 2 --max-tokens 300 --log-every 4 --dist-timeout 60)

"${train[@]}" --epochs 3 --nproc 2 --model-dir "$work/local" > /dev/null 2> "$work/local.err" ||
  fail "the local 2-process run failed: $(tail -n 5 "$work/local.err")"

# Both nodes, in the background, each under a deadline; returns the first failing node's code.
two_nodes() {
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for node in 0 1; do
    timeout 300 "$torchrun" --nnodes 2 --node-rank $node --nproc-per-node 1 --master-addr 127.0.0.1 \
      --master-port "$port" --no-python "${train[@]}" "$@" > "$work/node$node.out" 2> "$work/node$node.err" &
    eval "pid$node=$!"
  done
  wait "$pid0" || { echo "node 0: $(tail -n 5 "$work/node0.err")"; return 1; }
  wait "$pid1" || { echo "node 1: $(tail -n 5 "$work/node1.err")"; return 1; }
}
two_nodes --epochs 2 --model-dir "$work/nodes" || fail "the 2-node run failed"
grep -q "dev: best BLEU" "$work/node0.out" || fail "node 0 printed no summary: $(cat "$work/node0.out")"
[ -s "$work/node1.out" ] && fail "node 1 printed a summary too: $(cat "$work/node1.out")"
two_nodes --epochs 3 --resume --model-dir "$work/nodes" || fail "the resumed 2-node run failed"
grep -q "translation: resuming from" "$work/node0.err" || fail "the 2-node run did not resume: $(tail -n 5 "$work/node0.err")"

# Every TRAIN and EPOCH record's loss, in order (JSON: full double precision).
losses() { "$CABERT" inspect --json --limit -1 "$1/metrics.cabert" | grep -E '"kind":"(TRAIN|EPOCH)"' |
  grep -o '"train_loss":[-0-9.e+]*'; }
[ "$(losses "$work/local" | wc -l)" -ge 6 ] || fail "the local run logged too few losses: $(losses "$work/local")"
[ "$(losses "$work/local")" = "$(losses "$work/nodes")" ] ||
  fail "2 nodes (resumed) differ from 2 local processes: $(diff <(losses "$work/local") <(losses "$work/nodes"))"
"$CABERT" inspect "$work/nodes/last.cabert" | grep -q "world_size: 2" || fail "last.cabert lacks world_size 2"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
recipe=(-C "$CABERT_SOURCE_DIR/recipes/data_parallel" CABERT="$CABERT" TORCHRUN="$torchrun" OUT="$work/dp" NNODES=2
        NPROC=1 THREADS=1 STEPS=3 BATCH=8 MASTER_PORT="$port")
timeout 300 make -s "${recipe[@]}" join NODE_RANK=1 > "$work/join.out" 2>&1 &
join=$!
timeout 300 make -s "${recipe[@]}" scaling > "$work/scaling.out" 2>&1 ||
  fail "make scaling NNODES=2 failed: $(tail -n 20 "$work/scaling.out")"
wait "$join" || fail "make join NODE_RANK=1 failed: $(tail -n 20 "$work/join.out")"
grep -q '^| data parallel | 2 nodes x 1 x 1 | 16 | [0-9]* | ' "$work/dp/scaling.md" ||
  fail "the scaling table lacks its 2-node row: $(cat "$work/dp/scaling.md")"

# Options from a config file (issue 17, part 1): --dump-options prints every effective option of a command line
# (the global ones and its subcommand's, defaults included) as a TOML file that --config reads back; the
# precedence is defaults < file < command line; every file a run writes records that config and `inspect
# --config` prints it; rerun from that config alone (only the output directory changed on the command line), a
# pre-training run gives the same weights bit for bit.
source "$(dirname "$0")/lib.sh"
train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 32 -o "$work/corpus"
run_a=(pretrain --preset bert-tiny-composite --corpus "$work/corpus" --model-dir "$work/a" --steps 3 --batch-size 4
       --lr 3e-4 --set dropout=0.05)

# --dump-options prints and exits: nothing runs.
"$CABERT" --seed 7 "${run_a[@]}" --dump-options > "$work/a.toml"
[ ! -e "$work/a" ] || fail "--dump-options ran the command"
for line in 'seed=7' 'pretrain.steps=3' 'pretrain.batch-size=4' 'pretrain.lr=3e-4' 'pretrain.preset="bert-tiny-composite"' \
            'pretrain.set="dropout=0.05"' 'pretrain.warmup-steps=-1' "pretrain.model-dir=\"$work/a\""; do
  grep -qxF -- "$line" "$work/a.toml" || fail "--dump-options lacks '$line': $(cat "$work/a.toml")"
done
grep -q '^finetune\.\|^evaluate\.' "$work/a.toml" && fail "--dump-options holds another subcommand's options"
grep -q 'dump-options\|dump-config\|^config=' "$work/a.toml" && fail "--dump-options records the options that only print"

# The run records the same config in every file it writes.
"$CABERT" --seed 7 "${run_a[@]}" 2> "$work/a.err" || fail "the run: $(cat "$work/a.err")"
"$CABERT" inspect --config "$work/a/checkpoint-00000003.cabert" > "$work/a-recorded.toml"
cmp -s "$work/a.toml" "$work/a-recorded.toml" \
  || fail "inspect --config differs from --dump-options: $(diff "$work/a.toml" "$work/a-recorded.toml")"

# Rerun from the recorded config alone: the same weights, bit for bit.
"$CABERT" -q --config "$work/a-recorded.toml" pretrain --model-dir "$work/b"
[ -s "$work/b/checkpoint-00000003.cabert" ] || fail "the rerun from --config did not run 3 steps: $(ls "$work/b")"
"$CABERT" -q export --model "$work/a/checkpoint-00000003.cabert" -o "$work/a-hf"
"$CABERT" -q export --model "$work/b/checkpoint-00000003.cabert" -o "$work/b-hf"
cmp -s "$work/a-hf/model.safetensors" "$work/b-hf/model.safetensors" \
  || fail "the run repeated from its recorded config has other weights"

# Precedence: defaults < file < command line.
printf 'seed=11\n[pretrain]\nsteps=5\nlr=0.001\n' > "$work/mine.toml"
"$CABERT" --config "$work/mine.toml" "${run_a[@]}" --dump-options > "$work/mixed.toml"
for line in 'seed=11' 'pretrain.lr=3e-4' 'pretrain.steps=3' 'pretrain.warmup-steps=-1'; do
  grep -qxF -- "$line" "$work/mixed.toml" || fail "precedence: lacks '$line': $(cat "$work/mixed.toml")"
done
"$CABERT" --config "$work/mine.toml" pretrain --corpus "$work/corpus" --dump-options > "$work/file.toml"
for line in 'seed=11' 'pretrain.lr=0.001' 'pretrain.steps=5'; do
  grep -qxF -- "$line" "$work/file.toml" || fail "precedence: lacks '$line': $(cat "$work/file.toml")"
done

# Nested subcommands use their dotted path.
"$CABERT" tokenize train -i "$sample/gutenberg/11-0.txt" --vocab-size 321 --model-prefix "$work/t" --dump-options \
  > "$work/tok.toml"
grep -qxF 'tokenize.train.vocab-size=321' "$work/tok.toml" || fail "tokenize train: $(cat "$work/tok.toml")"

# Bad files are usage errors naming the problem; a key that names no option is refused, not ignored.
# Each names the file and line when the key or the bad value is the file's.
printf 'seed = 7\n\n[pretrain]\n# a comment\nstepz=5\n' > "$work/typo.toml"
expect_exit 2 "$work/typo.toml:5: 'pretrain.stepz' names no option of this command" \
  "$CABERT" --config "$work/typo.toml" pretrain --corpus "$work/corpus" --model-dir "$work/c"
printf 'pretrain.lr = 3e-4\npretrain.steps = "abc"\n' > "$work/value.toml"
expect_exit 2 "$work/value.toml:2: Could not convert: --steps = abc" \
  "$CABERT" --config "$work/value.toml" pretrain --corpus "$work/corpus" --model-dir "$work/c"
printf '[pretrain]\nlr = 3e-4\nsteps = 0\n' > "$work/zero.toml"
expect_exit 2 "$work/zero.toml:3: --steps: expected a positive count, got 0" \
  "$CABERT" --config "$work/zero.toml" pretrain --corpus "$work/corpus" --model-dir "$work/c"
# The command line's value overrides the file's: its error is the command line's, with no file named.
expect_exit 2 "--steps: expected a positive count, got -1" \
  "$CABERT" --config "$work/zero.toml" pretrain --corpus "$work/corpus" --model-dir "$work/c" --steps -1
if grep -q "zero.toml" "$work/err"; then fail "a command-line value blamed on the config file: $(cat "$work/err")"; fi
expect_exit 2 "$work/missing.toml" "$CABERT" --config "$work/missing.toml" pretrain --corpus "$work/corpus"
echo "config_file: ok"

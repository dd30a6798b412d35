# The encoder papers' pipeline, shared by recipes/chang2021 and recipes/convbert2020: raw text -> tokenizer ->
# pre-training corpus -> PRETRAIN_SEEDS pre-training runs per model (--seed 1, 2, ...) -> GLUE fine-tuning of each
# (SEEDS seeds per task) -> the table in the papers' layout (mean +- SEM (best) per task, and the GLUE-style
# average). With several pre-training seeds a cell is the mean over them of each one's fine-tuning mean, and the
# +- is the SEM over the pre-training seeds (`evaluate --summarize` groups the records by their pretrain_run).
#
# The including Makefile sets, for the scale being run (recipes/encoder_scales.mk gives what the two recipes
# share):
#   D                 the output folder of this scale (everything is written under it)
#   PRETRAINED        row names of the pre-trained models; for each row R: PRESET_R (a preset name), and
#                     optionally SETS_R (extra `--set a.b=v` flags) and OBJECTIVE_R (mlm or electra; default
#                     $(OBJECTIVE))
#   RAW               row names fine-tuned from random weights ("no pre-training"); PRESET_R / SETS_R as above
#   SIZE_SETS         `--set` flags applied to every model (the scale's model size)
#   TASKS             GLUE tasks (directory names under $(GLUE))
#   CORPUS, CORPUS_FORMAT, VOCAB, MAX_SENTENCES, MAX_LENGTH, STEPS, BATCH, PT_LR, WARMUP, EVAL_EVERY,
#   SAVE_EVERY, PRETRAIN_SEEDS, SEEDS, RAW_SEEDS (rows without pre-training; default SEEDS), FT_EPOCHS (empty:
#   the task's default), FT_LR (empty: Chang et al. Table 5),
#   FT_BATCH, FT_MAX_LENGTH, FT_WEIGHT_DECAY (empty: finetune's 0), MAX_TRAIN (0: all), POOLING (cls or mean),
#   DEVICE, THREADS, TITLE
#
# Every target is a file: re-running skips what is done; an interrupted pre-training resumes exactly from its
# last checkpoint (`pretrain --resume`); an interrupted fine-tuning starts that model/task again. Targets never
# share files, so `make -j N` is safe.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
# Every target is an explicit file target, so none is an intermediate that make would delete. The corpus and the
# pre-trained models are secondary (below): once every fine-tuning that starts from them is done, make does not
# remake them because they are missing, so a run carried across sittings (`make small-cpu-save`) need not keep
# them; any other deleted target is remade.

export OMP_WAIT_POLICY ?= passive

OBJECTIVE ?= mlm
POOLING ?= cls
# Under `make -j N` (N > 1) every job gets one intra-op thread, so N jobs share N cores without oversubscribing;
# a serial make gives each job all cores. (Evaluated in the recipe, where MAKEFLAGS holds -j.)
THREADS ?= $(if $(filter -j%,$(MAKEFLAGS)),$(if $(filter -j1,$(MAKEFLAGS)),0,1),0)
DEVICE ?= cpu
RUN = $(CABERT) --threads $(THREADS)
# LAUNCH prefixes the training commands (pretrain, finetune) and nothing else, so that a cluster starts them
# data-parallel as they are: `make paper LAUNCH="torchrun --nproc-per-node 8 --no-python"` (docs/training.md,
# "Data parallelism"). Tokenizing, building the corpus and the table run as one process. Default: empty.
LAUNCH ?=
TRAIN = $(LAUNCH) $(RUN)

PRETRAIN_SEEDS ?= 1
RAW_SEEDS ?= $(SEEDS)
# For the TITLE: ", N without pre-training" where rows without pre-training have another number of seeds.
raw_seeds_note = $(if $(and $(RAW),$(filter-out $(SEEDS),$(RAW_SEEDS))),$(comma) $(RAW_SEEDS) without pre-training)
pretrain_seeds := $(shell seq 1 $(PRETRAIN_SEEDS))

row_preset = $(PRESET_$(1))
row_sets = $(SIZE_SETS) $(SETS_$(1))
row_objective = $(or $(OBJECTIVE_$(1)),$(OBJECTIVE))

# ---- Tokenizer (lower-cased, as BERT-uncased and ELECTRA's vocabularies) and pre-training corpus (masking is
# drawn at training time, so one corpus serves every row). ----
$(D)/spm.model:
	mkdir -p $(D)
	[ -f $(D)/started ] || date +%s > $(D)/started
	$(RUN) -q tokenize train -i $(CORPUS) --input-format $(CORPUS_FORMAT) --vocab-size $(VOCAB) --lowercase \
	  --max-sentences $(MAX_SENTENCES) --model-prefix $(D)/spm

$(D)/corpus.done: $(D)/spm.model
	rm -rf $(D)/corpus && mkdir -p $(D)/corpus
	$(RUN) -q build-corpus -m $< -i $(CORPUS) --input-format $(CORPUS_FORMAT) --max-length $(MAX_LENGTH) \
	  --shards 2 -o $(D)/corpus/shard
	touch $@

# ---- Pre-training: the same corpus, steps, batch and learning rate for every row. ----
# One run per row and pre-training seed, in pt/ROW/seed-S/. The newest checkpoint is copied to final.cabert once
# the run has finished all its steps. The corpus is order-only: remade (the same shards from the same tokenizer)
# for a later row, it does not make the finished rows out of date.
define PRETRAIN_RULE
$(D)/pt/$(1)/seed-$(2)/final.cabert: $(D)/spm.model | $(D)/corpus.done
	mkdir -p $$(@D); start=$$$$SECONDS; \
	$$(TRAIN) --seed $(2) pretrain --preset $(call row_preset,$(1)) $(foreach s,$(call row_sets,$(1)),--set $(s)) \
	  --objective $(call row_objective,$(1)) --corpus $(D)/corpus --model-dir $$(@D) --steps $(STEPS) \
	  --batch-size $(BATCH) --lr $(PT_LR) --warmup-steps $(WARMUP) --eval-every $(EVAL_EVERY) \
	  --save-every $(SAVE_EVERY) --device $(DEVICE) --resume 2>> $$(@D)/pretrain.log && \
	echo "pretrain_seconds $$$$((SECONDS - start))" >> $$(@D)/time.txt
	cp "$$$$(ls $$(@D)/checkpoint-*.cabert | tail -n 1)" $$@.tmp
	mv $$@.tmp $$@
endef
$(foreach r,$(PRETRAINED),$(foreach s,$(pretrain_seeds),$(eval $(call PRETRAIN_RULE,$(r),$(s)))))

# ---- GLUE fine-tuning: row x pre-training seed x task, SEEDS runs each (--seed, --seed+1, ...), best epoch by
# dev score; in ft/ROW/seed-S/TASK/ (a row without pre-training: ft/ROW/TASK/). ----
START_pretrained = --init $(D)/pt/$(1)/seed-$(4)/final.cabert
START_raw = --preset $(call row_preset,$(1)) $(foreach s,$(call row_sets,$(1)),--set $(s)) --tokenizer $(D)/spm.model
NEEDS_pretrained = $(D)/pt/$(1)/seed-$(4)/final.cabert
NEEDS_raw = $(D)/spm.model
FT_DIR_pretrained = $(D)/ft/$(1)/seed-$(4)/$(3)
FT_DIR_raw = $(D)/ft/$(1)/$(3)
# $(1) row, $(2) pretrained|raw, $(3) task, $(4) pre-training seed (pretrained rows)
define FINETUNE_RULE
$(call FT_DIR_$(2),$(1),,$(3),$(4))/metrics.cabert: $(call NEEDS_$(2),$(1),,,$(4))
	mkdir -p $$(@D); start=$$$$SECONDS; \
	$$(TRAIN) -q finetune $(call START_$(2),$(1),,,$(4)) --task $(3) --data $(GLUE)/$(3) \
	  --runs $(if $(filter raw,$(2)),$(RAW_SEEDS),$(SEEDS)) \
	  $(if $(FT_EPOCHS),--epochs $(FT_EPOCHS)) $(if $(FT_LR),--lr $(FT_LR)) --batch-size $(FT_BATCH) \
	  --max-length $(FT_MAX_LENGTH) --max-train-examples $(MAX_TRAIN) --pooling $(POOLING) --name "$(1)" \
	  $(if $(FT_WEIGHT_DECAY),--weight-decay $(FT_WEIGHT_DECAY)) \
	  --device $(DEVICE) \
	  --model-dir $$(@D) > $$(@D)/finetune.out && \
	echo "finetune_seconds $$$$((SECONDS - start))" > $$(@D)/time.txt
endef
$(foreach r,$(PRETRAINED),$(foreach s,$(pretrain_seeds),$(foreach t,$(TASKS),\
  $(eval $(call FINETUNE_RULE,$(r),pretrained,$(t),$(s))))))
$(foreach r,$(RAW),$(foreach t,$(TASKS),$(eval $(call FINETUNE_RULE,$(r),raw,$(t)))))

FINETUNED := $(foreach r,$(PRETRAINED),$(foreach s,$(pretrain_seeds),$(foreach t,$(TASKS),\
               $(D)/ft/$(r)/seed-$(s)/$(t)/metrics.cabert))) \
             $(foreach r,$(RAW),$(foreach t,$(TASKS),$(D)/ft/$(r)/$(t)/metrics.cabert))

# ---- The table: rows in the order PRETRAINED then RAW, tasks in GLUE order, then the cost of each row and its
# pre-training's held-out accuracies (the mean over the pre-training seeds) beside their controls. ----
PT_SEEDS_LINE = $(if $(filter 1,$(PRETRAIN_SEEDS)),One pre-training run per row (PRETRAIN_SEEDS=1): as to pre-training a smoke run; \
  ± is over the fine-tuning seeds only.,Pre-training seeds: $(PRETRAIN_SEEDS) per pre-trained row (--seed 1-$(PRETRAIN_SEEDS)); \
  ± is the SEM over them (each one's fine-tuning seeds averaged first); rows without pre-training: over the fine-tuning seeds.)
# Minutes in the time.txt files under $(D)/$(1) (each line "STEP_seconds N").
step_minutes = find $(D)/$(1) -name time.txt -exec cat {} + 2> /dev/null | awk '{ s += $$2 } END { printf "%.0f", s / 60 }'
$(D)/table.md: $(FINETUNED)
	{ echo "$(strip $(PT_SEEDS_LINE))"; echo; echo "$(TITLE)"; echo; \
	  echo "Command: \`make -C recipes/$(notdir $(patsubst %/,%,$(HERE))) $(strip $(filter -j%,$(MAKEFLAGS)) $(SCALE) $(filter-out SCALE=%,$(MAKEOVERRIDES)))\`;" \
	    "$$($(CABERT) --version | head -n 1);" \
	    "$$(nproc) cores ($$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1));" \
	    "$$(if [ -f $(D)/started ]; then echo "wall time from the first step to this table" \
	      "$$(( ($$(date +%s) - $$(cat $(D)/started)) / 60 )) min;"; else echo "carried across sittings" \
	      "(small-cpu-restore), so no one wall time;"; fi)" \
	    "the steps' own times, summed over jobs and sittings: $$($(call step_minutes,pt)) min of pre-training," \
	    "$$($(call step_minutes,ft)) min of fine-tuning."; echo; \
	  $(CABERT) evaluate --summarize $(FINETUNED) --format markdown --aggregate mean-best; echo; \
	  echo "| row | pre-training s (all seeds) | held-out accuracy % (ELECTRA: generator MLM, discriminator RTD; trivial: predicting \"original\" everywhere) | fine-tuning s (all tasks and seeds) |"; \
	  echo "|---|---:|---:|---:|"; \
	  for r in $(PRETRAINED) $(RAW); do \
	    pt=-; acc=; \
	    if compgen -G "$(D)/pt/$$r/seed-*/time.txt" > /dev/null; then \
	      pt=$$(cat $(D)/pt/$$r/seed-*/time.txt | awk '{s += $$2} END {print s}'); \
	      last=$$(for m in $(D)/pt/$$r/seed-*/metrics.cabert; do \
	        $(CABERT) inspect --json --limit -1 $$m | grep '"phase":"eval"' | tail -n 1; done); \
	      for k in mlm rtd rtd_trivial; do \
	        v=$$(sed -n "s/.*\"$${k}_accuracy\":\([0-9.e-]*\).*/\1/p" <<< "$$last" | awk '{s += $$1; n++} END {if (n) printf "%.1f", 100 * s / n}'); \
	        [ -z "$$v" ] || case $$k in \
	          rtd_trivial) acc="$$acc (trivial $$v)";; \
	          *) acc="$${acc:+$$acc, }$${k^^} $$v";; \
	        esac; \
	      done; \
	    fi; \
	    ft=$$(find $(D)/ft/$$r -name time.txt -exec cat {} + | awk '{s += $$2} END {print s}'); \
	    echo "| $$r | $$pt | $${acc:--} | $$ft |"; \
	  done; } > $@.tmp
	mv $@.tmp $@

# ---- Positive control of the fine-tuning (issue 59): `make hf-control` fine-tunes row HF_ROW's pre-trained weights
# (an absolute-position BERT or ELECTRA row, which transformers' classes compute exactly) with transformers' own
# Trainer (recipes/hf_control/finetune_hf.py: the same data, lr, epochs, batch, length, weight decay, fine-tuning
# seeds and [CLS] head), and writes hf-control.md: cabert's row beside transformers'. Needs the venv's
# transformers, accelerate and sentencepiece (`pip install accelerate sentencepiece` beside scripts/setup.sh's).
PYTHON ?= $(abspath $(HERE)../../.venv/bin/python)
HF_TASKS ?= $(TASKS)
hf_lr = $(or $(FT_LR),$(if $(filter QNLI,$(1)),1e-4,3e-4))
hf_epochs = $(or $(FT_EPOCHS),$(if $(filter RTE STS-B,$(1)),10,$(if $(filter MNLI QQP,$(1)),4,3)))
ft_seeds := $(shell seq 42 $$((41 + $(SEEDS))))
$(D)/hf/seed-%/export/config.json: $(D)/pt/$(HF_ROW)/seed-%/final.cabert
	$(CABERT) -q export --model $< -o $(@D)
# $(1) task, $(2) pre-training seed
define HF_RULE
$(D)/hf/seed-$(2)/$(1).jsonl: $(D)/hf/seed-$(2)/export/config.json
	$(PYTHON) $(HERE)../hf_control/finetune_hf.py --model $$(<D) --task $(1) --data $(GLUE)/$(1) \
	  --seeds $(ft_seeds) --lr $(call hf_lr,$(1)) --epochs $(call hf_epochs,$(1)) --batch-size $(FT_BATCH) \
	  --max-length $(FT_MAX_LENGTH) --max-train-examples $(MAX_TRAIN) --weight-decay $(or $(FT_WEIGHT_DECAY),0) \
	  --output-dir $$(@D)/trainer-$(1) 2> $$(@D)/$(1).log > $$@.tmp
	mv $$@.tmp $$@
endef
$(foreach t,$(HF_TASKS),$(foreach s,$(pretrain_seeds),$(eval $(call HF_RULE,$(t),$(s)))))
HF_RESULTS := $(foreach t,$(HF_TASKS),$(foreach s,$(pretrain_seeds),$(D)/hf/seed-$(s)/$(t).jsonl))
HF_CABERT := $(foreach t,$(HF_TASKS),$(foreach s,$(pretrain_seeds),$(D)/ft/$(HF_ROW)/seed-$(s)/$(t)/metrics.cabert))
.PHONY: hf-control
hf-control: $(D)/hf-control.md
	@cat $<
$(D)/hf-control.md: $(HF_RESULTS) $(HF_CABERT)
	{ echo "Positive control: row $(HF_ROW)'s pre-trained weights fine-tuned by cabert and by transformers' Trainer" \
	    "with the same data and settings (scale $(SCALE); recipes/hf_control/finetune_hf.py says what differs)."; \
	  echo; $(CABERT) evaluate --summarize $(HF_CABERT) --format markdown --aggregate mean-best | \
	    sed -n '/^| model/,/^$$/p' | sed '/^$$/d' | sed -n '1,2p;/^| $(HF_ROW) /p'; \
	  $(PYTHON) $(HERE)../hf_control/table.py "transformers ($(HF_ROW))" $(HF_TASKS) -- $(HF_RESULTS); \
	} > $@.tmp
	mv $@.tmp $@

# ---- Across sittings (machines that do not keep OUT between them), recipes/progress.mk: `make small-cpu-save`
# packs into SC_PROGRESS the tokenizer and every finished unit, a pre-trained row's seed whose fine-tunings on all
# TASKS are done (its pre-training's records, log and time, and the fine-tunings' records, outputs and times) or a
# row without pre-training's finished task, but no checkpoint and not the corpus (the pre-trained models are 7-25
# MB each: too large to commit at every sitting). A unit in flight is left out and starts over after
# `make small-cpu-restore`; a serial make finishes the units one at a time, pre-training then its fine-tunings,
# so a sitting's end loses at most the one in flight (-j2: two). After a restore, `make hf-control` needs HF_ROW's
# pre-trained models again: it pre-trains them again (the same weights: runs repeat bit for bit on one machine),
# which makes those fine-tunings out of date too; run it in the sitting that pre-trains HF_ROW's seeds.
.SECONDARY: $(D)/corpus.done \
  $(foreach r,$(PRETRAINED),$(foreach s,$(pretrain_seeds),$(D)/pt/$(r)/seed-$(s)/final.cabert))
SC_PROGRESS ?= $(HERE)results/$(SCALE)-progress.tar.gz
SC_ROOT = $(D)
sc_kept = find $(1) -type f \( ! -name '*.cabert' -o -name metrics.cabert \)
SC_FILES = ls spm.model spm.vocab; \
  for p in $(foreach r,$(PRETRAINED),$(foreach s,$(pretrain_seeds),pt/$(r)/seed-$(s))); do \
    [ -f $$p/final.cabert ] || continue; unit=ft/$${p\#pt/}; complete=1; \
    for t in $(TASKS); do [ -f $$unit/$$t/time.txt ] || complete=; done; \
    [ -z "$$complete" ] || $(call sc_kept,$$p $$unit); done; \
  for t in $(foreach r,$(RAW),$(foreach t,$(TASKS),ft/$(r)/$(t))); do \
    [ -f $$t/time.txt ] && $(call sc_kept,$$t); done
include $(HERE)../progress.mk

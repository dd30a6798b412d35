# The settings recipes/chang2021 and recipes/convbert2020 share at each scale (SCALE = smoke, small-cpu,
# paper-small or paper-base). Each recipe includes this file after its own settings for the scale and before
# its rows (whose presets are named by SIZE). Every setting here is `?=`, so what the command line or the recipe
# set first (its rows, its model size, its paper's steps, batch and learning rates) stays. It also sets D,
# the scale's output folder under OUT.

ifeq ($(SCALE),smoke)
  # Minutes on a laptop or CI: every step on tiny settings, one pre-training run per row (the table's first
  # line says so) and 2 fine-tuning seeds; measures nothing.
  CORPUS ?= $(SAMPLE_CORPUS)
  GLUE ?= $(SMOKE_GLUE)
  TASKS ?= $(SMOKE_TASKS)
  SIZE ?= tiny
  SIZE_SETS ?=
  VOCAB ?= 2000
  MAX_SENTENCES ?= 100000
  MAX_LENGTH ?= 32
  STEPS ?= 20
  BATCH ?= 8
  PT_LR ?= 1e-3
  WARMUP ?= 2
  EVAL_EVERY ?= 10
  SAVE_EVERY ?= 10
  PRETRAIN_SEEDS ?= 1
  SEEDS ?= 2
  FT_EPOCHS ?= 1
  FT_LR ?= 1e-3
  FT_BATCH ?= 16
  FT_MAX_LENGTH ?= 32
  MAX_TRAIN ?= 64
  POOLING ?= mean
else ifeq ($(SCALE),small-cpu)
  # A few hours on 2 CPU cores (`make -j2 small-cpu`): Project Gutenberg books, four GLUE tasks, 3 pre-training
  # seeds per row and 3 fine-tuning seeds per pre-trained model.
  CORPUS ?= $(SHARED)/corpus/gutenberg
  GLUE ?= $(SHARED)/glue
  TASKS ?= CoLA SST-2 MRPC STS-B
  SIZE ?= tiny
  VOCAB ?= 8000
  MAX_SENTENCES ?= 400000
  MAX_LENGTH ?= 64
  STEPS ?= 4000
  BATCH ?= 32
  PT_LR ?= 1e-3
  WARMUP ?= 400
  EVAL_EVERY ?= 1000
  SAVE_EVERY ?= 500
  PRETRAIN_SEEDS ?= 3
  # 2 fine-tuning seeds per pre-trained model (6 runs per cell over the 3 pre-trainings) and 3 for a row without
  # pre-training (its +- is over them alone): measured 2026-12-06 on 2 cores, -j2, a pre-training takes ~810 s and
  # a row's fine-tuning at this protocol ~2,550 s for 3 seeds (STS-B's 10 epochs are 61% of it), so 3 seeds
  # everywhere would be ~7.3 h; this is ~5.5 h (a pre-trained row's fine-tuning with 2 seeds: 1,600-1,700 s).
  SEEDS ?= 2
  RAW_SEEDS ?= 3
  # The papers' fine-tuning protocol (issue 59): Chang et al. Table 5's learning rates and epochs by task (10 for
  # STS-B and RTE), sequences of 128 tokens (64 truncated many MRPC and STS-B pairs), [CLS] pooling; the departure
  # is the training examples (at most MAX_TRAIN), which the table's title gives.
  FT_EPOCHS ?=
  FT_LR ?=
  FT_BATCH ?= 32
  FT_MAX_LENGTH ?= 128
  MAX_TRAIN ?= 10000
  POOLING ?= cls
else ifneq ($(filter paper-%,$(SCALE)),)
  # The papers' scale on a GPU: their corpus (PAPER_CORPUS), sequence length 128, 10K warm-up steps, all of
  # GLUE with all its training examples; fine-tuning epochs by task and learning rates of Chang et al. Table 5.
  CORPUS ?= $(PAPER_CORPUS)
  GLUE ?= $(SHARED)/glue
  TASKS ?= CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE
  SIZE ?= $(patsubst paper-%,%,$(SCALE))
  SIZE_SETS ?=
  VOCAB ?= 30000
  MAX_SENTENCES ?= 10000000
  MAX_LENGTH ?= 128
  WARMUP ?= 10000
  EVAL_EVERY ?= 10000
  SAVE_EVERY ?= 10000
  PRETRAIN_SEEDS ?= 3
  FT_EPOCHS ?=
  FT_LR ?=
  FT_BATCH ?= 32
  FT_MAX_LENGTH ?= 128
  MAX_TRAIN ?= 0
  DEVICE ?= cuda
endif

ifneq ($(SCALE),)
  D := $(OUT)/$(SCALE)
  CORPUS_FORMAT ?= gutenberg
endif

# `make small-cpu-save` / `make small-cpu-restore` (recipes/encoders.mk) are the small-cpu scale's unless the
# command line names another SCALE.
ifeq ($(SCALE),)
.PHONY: small-cpu-save small-cpu-restore
small-cpu-save small-cpu-restore:
	$(MAKE) -f $(HERE)Makefile $@ SCALE=small-cpu
endif

# Paths the recipes share. HERE is the including recipe's folder (recipes/NAME/).
CABERT ?= $(abspath $(HERE)../../build/bin/cabert)
SHARED ?= $(abspath $(HERE)../../../shared/data)
# The samples the project ships (recipes/quickstart/data, see its PROVENANCE.md): used when ../shared is absent.
SAMPLE := $(abspath $(HERE)../quickstart/data)
SAMPLE_CORPUS := $(SAMPLE)/gutenberg
# Smoke runs fine-tune on GLUE from ../shared/data when it is there (four tasks), else on the shipped SST-2 sample.
ifneq ($(wildcard $(SHARED)/glue/CoLA/train.tsv),)
  SMOKE_GLUE := $(SHARED)/glue
  SMOKE_TASKS := CoLA SST-2 MRPC STS-B
else
  SMOKE_GLUE := $(SAMPLE)
  SMOKE_TASKS := SST-2
endif

# A comma, for make functions' arguments that hold one.
comma := ,

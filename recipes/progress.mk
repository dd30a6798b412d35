# A long run carried across sittings on machines that do not keep OUT between them (`small-cpu` of
# recipes/wu2019, recipes/tay2021 and, through recipes/encoders.mk, recipes/chang2021 and recipes/convbert2020).
# `make small-cpu-save` packs the files of the finished steps into SC_PROGRESS; `make small-cpu-restore` unpacks
# them with their times, and `make small-cpu` then runs only what is left.
# The including recipe sets, before including this file:
#   SC_PROGRESS   the tarball (the recipe's results/small-cpu-progress.tar.gz unless the command line says)
#   SC_ROOT       the folder the paths in the tarball are relative to
#   SC_FILES      shell commands, run in SC_ROOT, that print the files to keep, one per line (a file that is
#                 being written, *.tmp, is left out)
.PHONY: small-cpu-save small-cpu-restore
small-cpu-save:
	cd $(SC_ROOT) && { $(SC_FILES); true; } | grep -v '\.tmp$$' | sort -u | tar -czf $(SC_PROGRESS).tmp -T -
	mv $(SC_PROGRESS).tmp $(SC_PROGRESS)
	@echo "small-cpu-save: $$(tar -tzf $(SC_PROGRESS) | wc -l) files in $(SC_PROGRESS)"
small-cpu-restore:
	mkdir -p $(SC_ROOT)
	tar -xzf $(SC_PROGRESS) -C $(SC_ROOT)
	@echo "small-cpu-restore: $$(tar -tzf $(SC_PROGRESS) | wc -l) files into $(SC_ROOT); \`make small-cpu\` runs what is left"

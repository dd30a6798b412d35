// The JSONL table reader (lib/tasks/table.h): one object per line, fields by key (strings, numbers,
// booleans; anything else as its JSON text); strict and with --skip-bad-rows.
#include <string>

#include "lib/tasks/table.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cabert::fuzz::input_file(data, size, ".jsonl");
  for (bool pair : {false, true}) {
    for (bool skip : {false, true}) {
      cabert::fuzz::expect_only<cabert::DataError>("jsonl", [&] {
        cabert::tasks::TableOptions table;
        table.format = cabert::tasks::TableFormat::kJsonl;
        table.text_pair_column = pair ? "text_b" : "";
        table.id_column = pair ? "id" : "";
        cabert::tasks::ReadOptions options;
        options.skip_bad_rows = skip;
        cabert::tasks::TaskData read = cabert::tasks::read_table(path, table, options);
        if (read.labeled && !read.examples.empty()) {
          cabert::fuzz::expect_only<cabert::DataError>("generic task", [&] {
            cabert::tasks::generic_task("fuzz", cabert::tasks::TaskKind::kClassification, pair, {}, &read);
          });
        }
      });
    }
  }
  return 0;
}

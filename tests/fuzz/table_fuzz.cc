// The generic table readers (lib/tasks/table.h) on CSV (RFC 4180 quoting, quoted fields across lines) and
// TSV: columns by header name, then without a header by index, strict and with --skip-bad-rows.
#include <string>

#include "lib/tasks/table.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cabert::fuzz::input_file(data, size, ".table");
  for (auto format : {cabert::tasks::TableFormat::kCsv, cabert::tasks::TableFormat::kTsv}) {
    for (bool header : {true, false}) {
      for (bool skip : {false, true}) {
        // Without a header, a column index beyond the first row is a usage error (the option is wrong).
        auto read = [&] {
          cabert::tasks::TableOptions table;
          table.format = format;
          table.header = header;
          table.text_column = header ? "text" : "1";
          table.text_pair_column = header ? "" : "2";
          table.label_column = header ? "label" : "0";
          table.id_column = header ? "" : "3";
          cabert::tasks::ReadOptions options;
          options.skip_bad_rows = skip;
          cabert::tasks::TaskData rows = cabert::tasks::read_table(path, table, options);
          if (rows.labeled && !rows.examples.empty()) {
            cabert::fuzz::expect_only<cabert::DataError>("generic task", [&] {
              cabert::tasks::generic_task("fuzz", cabert::tasks::TaskKind::kClassification, !header, {}, &rows);
            });
          }
        };
        if (header) {
          cabert::fuzz::expect_only<cabert::DataError>("table", read);
        } else {
          cabert::fuzz::expect_only<cabert::DataError, cabert::UsageError>("table without header", read);
        }
      }
    }
  }
  return 0;
}

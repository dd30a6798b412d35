// The GLUE reader (lib/tasks/glue.h): distribution TSVs, columns by header name, CoLA without a header,
// labels checked against the task's set (STS-B: a score in [0, 5]); strict and with --skip-bad-rows.
#include <string>

#include "lib/tasks/glue.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cabert::fuzz::input_file(data, size, ".tsv");
  for (const char* name : {"CoLA", "STS-B", "MNLI", "MRPC"}) {
    const cabert::tasks::GlueTask& task = cabert::tasks::glue_task(name);
    for (bool skip : {false, true}) {
      cabert::fuzz::expect_only<cabert::DataError>(name, [&] {
        cabert::tasks::ReadOptions options;
        options.skip_bad_rows = skip;
        cabert::tasks::TaskData read = cabert::tasks::read_glue(task, path, options);
        for (const auto& example : read.examples) {
          if (example.line == 0) __builtin_trap();
        }
      });
    }
  }
  return 0;
}

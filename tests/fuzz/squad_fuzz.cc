// The SQuAD reader (lib/tasks/squad.h): v1.1 / v2.0 JSON, every answer checked against its context in code
// points; as a v1.1 and a v2.0 task, strict and with --skip-bad-rows.
#include <string>

#include "lib/tasks/squad.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cabert::fuzz::input_file(data, size, ".json");
  for (const char* name : {"squad1.1", "squad2.0"}) {
    cabert::tasks::TaskDefinition definition;
    if (!cabert::tasks::squad_definition(name, &definition)) __builtin_trap();
    for (bool skip : {false, true}) {
      cabert::fuzz::expect_only<cabert::DataError>(name, [&] {
        cabert::tasks::ReadOptions options;
        options.skip_bad_rows = skip;
        cabert::tasks::SquadData read = cabert::tasks::read_squad_split(definition, path, options);
        for (const auto& question : read.questions) {
          const std::string& context = read.contexts.at(question.context_index);
          for (const auto& answer : question.answers) {
            // Accepted answers lie inside their context, where their code-point offset says.
            if (context.compare(answer.byte_start, answer.text.size(), answer.text) != 0) __builtin_trap();
            if (cabert::tasks::utf8_byte_offset(context, answer.char_start) != answer.byte_start) __builtin_trap();
          }
        }
      });
    }
  }
  return 0;
}

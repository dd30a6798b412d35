#include "lib/tasks/squad.h"

#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/json_input.h"
#include "lib/core/log.h"
#include "lib/tasks/glue.h"

namespace cabert::tasks {

size_t utf8_byte_offset(const std::string& text, int64_t index) {
  if (index < 0) return std::string::npos;
  size_t byte = 0;
  for (int64_t count = 0; count < index; ++count) {
    if (byte >= text.size()) return std::string::npos;
    auto lead = static_cast<unsigned char>(text[byte]);
    byte += lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  }
  return byte <= text.size() ? byte : std::string::npos;
}

namespace {

using nlohmann::json;

const json& member(const json& object, const char* key, const std::string& where, const std::string& path) {
  if (!object.is_object() || !object.contains(key)) {
    throw DataError(str(path, ": ", where, ": expected a field \"", key, "\""));
  }
  return object.at(key);
}

const json& array_member(const json& object, const char* key, const std::string& where, const std::string& path) {
  const json& value = member(object, key, where, path);
  if (!value.is_array()) {
    throw DataError(str(path, ": ", where, ".", key, ": expected an array, got ", value.type_name()));
  }
  return value;
}

std::string string_member(const json& object, const char* key, const std::string& where, const std::string& path) {
  const json& value = member(object, key, where, path);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  throw DataError(str(path, ": ", where, ".", key, ": expected a string, got ", value.type_name()));
}

}  // namespace

SquadData read_squad(const std::string& path, const ReadOptions& options) {
  SquadData data;
  data.path = path;
  json root;
  try {
    root = parse_json_input(read_file(path));
  } catch (const JsonInputError& error) {
    const std::string problem = str("invalid JSON (", error.what(), ")");
    throw DataError(error.byte() ? at_offset(path, error.byte(), problem) : str(path, ": ", problem));
  }
  if (root.is_object() && root.contains("version") && root["version"].is_string()) {
    data.version = root["version"].get<std::string>();
  }
  if (!root.is_object()) throw DataError(str(path, ": top level: expected an object, got ", root.type_name()));
  const std::string top_level = "top level";  // named: GCC 13's -Wdangling-reference suspects a temporary
  const json& articles = member(root, "data", top_level, path);
  if (!articles.is_array()) {
    throw DataError(str(path, ": data: expected an array of articles, got ", articles.type_name()));
  }
  for (size_t a = 0; a < articles.size(); ++a) {
    std::string article_where = str("data[", a, "]");
    const json& article = articles[a];
    std::string title = article.is_object() && article.contains("title") && article["title"].is_string()
                            ? article["title"].get<std::string>()
                            : "";
    const json& paragraphs = array_member(article, "paragraphs", article_where, path);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      std::string paragraph_where = str(article_where, ".paragraphs[", p, "]");
      const json& paragraph = paragraphs[p];
      data.contexts.push_back(string_member(paragraph, "context", paragraph_where, path));
      const std::string& context = data.contexts.back();
      const json& qas = array_member(paragraph, "qas", paragraph_where, path);
      for (size_t q = 0; q < qas.size(); ++q) {
        std::string where = str(paragraph_where, ".qas[", q, "]");
        const json& qa = qas[q];
        SquadQuestion question;
        question.id = string_member(qa, "id", where, path);
        where += str(" (id ", question.id, ")");
        question.question = string_member(qa, "question", where, path);
        question.title = title;
        question.context_index = data.contexts.size() - 1;
        question.is_impossible =
            qa.contains("is_impossible") && qa["is_impossible"].is_boolean() && qa["is_impossible"].get<bool>();
        std::string problem;
        const json& answers = array_member(qa, "answers", where, path);
        for (size_t k = 0; k < answers.size() && problem.empty(); ++k) {
          SquadAnswer answer;
          const std::string answer_where = str(where, ".answers[", k, "]");
          answer.text = string_member(answers[k], "text", answer_where, path);
          const json& start = member(answers[k], "answer_start", answer_where, path);
          if (!start.is_number_integer()) {
            problem = str("answers[", k, "].answer_start: expected an integer");
            break;
          }
          answer.char_start = start.get<int64_t>();
          answer.byte_start = utf8_byte_offset(context, answer.char_start);
          if (answer.byte_start == std::string::npos ||
              context.compare(answer.byte_start, answer.text.size(), answer.text) != 0) {
            problem = str("answers[", k, "]: answer_start ", answer.char_start, " does not point at \"", answer.text,
                          "\" in the context");
          }
          question.answers.push_back(std::move(answer));
        }
        if (problem.empty() && question.answers.empty() && !question.is_impossible) {
          problem = "no answers and not marked is_impossible";
        }
        if (!problem.empty()) {
          if (!options.skip_bad_rows) throw DataError(str(path, ": ", where, ": ", problem));
          ++data.skipped_questions;
          continue;
        }
        data.questions.push_back(std::move(question));
      }
    }
  }
  return data;
}

bool squad_definition(const std::string& name, TaskDefinition* definition) {
  std::string squashed = canonical_task_name(name);
  if (squashed != "squad" && squashed != "squad11" && squashed != "squadv11" && squashed != "squad1" &&
      squashed != "squad20" && squashed != "squadv20" && squashed != "squad2") {
    return false;
  }
  definition->squad_v2 = squashed.find('2') != std::string::npos;
  definition->name = definition->squad_v2 ? "SQuAD2.0" : "SQuAD1.1";
  definition->kind = TaskKind::kSpan;
  definition->pair = true;
  definition->metrics = {"exact", "f1"};
  return true;
}

SquadData read_squad_split(const TaskDefinition& definition, const std::string& path, const ReadOptions& options) {
  SquadData data = read_squad(path, options);
  for (const auto& question : data.questions) {
    if (question.is_impossible && !definition.squad_v2) {
      throw DataError(str(path, ": question ", question.id,
                          " is marked is_impossible, which SQuAD v1.1 does not allow; use --task squad2.0"));
    }
  }
  if (data.skipped_questions > 0) {
    log_warning(path, ": skipped ", data.skipped_questions, " malformed questions (--skip-bad-rows)");
  }
  return data;
}

}  // namespace cabert::tasks

#include "lib/tasks/table.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

#include "lib/core/errors.h"
#include "lib/core/json_input.h"
#include "lib/text/text_source.h"
#include "lib/text/utf8.h"

namespace cabert::tasks {

using text::LineReader;
using text::trim;

TableFormat parse_table_format(const std::string& name) {
  if (name == "csv") return TableFormat::kCsv;
  if (name == "tsv") return TableFormat::kTsv;
  if (name == "jsonl") return TableFormat::kJsonl;
  throw UsageError(str("--format: expected csv, tsv or jsonl, got '", name, "'"));
}

TableFormat table_format_from_path(const std::string& path) {
  auto dot = path.rfind('.');
  std::string extension = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == "csv") return TableFormat::kCsv;
  if (extension == "tsv" || extension == "txt") return TableFormat::kTsv;
  if (extension == "jsonl" || extension == "json" || extension == "ndjson") return TableFormat::kJsonl;
  throw UsageError(str(path, ": cannot tell the format from the extension; pass --format csv|tsv|jsonl"));
}

namespace {

// Reads one CSV record (which may span lines). Returns false at the end of input. A problem goes to *error,
// found at line *error_line: invalid UTF-8, or a quote never closed (reported where it opened; the record
// may not grow past the line bound while the reader looks for the closing quote).
bool read_csv_record(LineReader& reader, std::vector<std::string>* fields, uint64_t* first_line, std::string* error,
                     uint64_t* error_line) {
  std::string line;
  if (!reader.next(&line)) return false;
  *first_line = reader.line_number();
  *error_line = *first_line;
  fields->assign(1, "");
  bool quoted = false;
  uint64_t quote_line = 0;
  size_t quote_column = 0, record_bytes = line.size();
  auto check_utf8 = [&]() {
    if (std::string problem = text::utf8_problem(line); !problem.empty() && error->empty()) {
      *error = problem;
      *error_line = reader.line_number();
    }
  };
  check_utf8();
  size_t i = 0;
  while (true) {
    if (i >= line.size()) {
      if (!quoted) return true;
      std::string more;
      if (!reader.next(&more)) {
        // Reported at the line where the quote opens (and its column, when not the first).
        *error = "unterminated quoted field at the end of the file";
        if (quote_column > 1) *error += str(" (the quote opens at column ", quote_column, ")");
        *error_line = quote_line;
        return true;
      }
      record_bytes += more.size() + 1;
      if (record_bytes > text::max_line_bytes()) {
        throw DataError(at_line(reader.name(), quote_line,
                                str("the quoted field opened at column ", quote_column, " runs past ",
                                    text::max_line_bytes(), " bytes (--max-line-bytes); is its quote never closed?")));
      }
      fields->back() += '\n';
      line = more;
      check_utf8();
      i = 0;
      continue;
    }
    char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          fields->back() += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        fields->back() += c;
      }
    } else if (c == '"' && fields->back().empty()) {
      quoted = true;
      quote_line = reader.line_number();
      quote_column = i + 1;
    } else if (c == ',') {
      fields->emplace_back();
    } else {
      fields->back() += c;
    }
    ++i;
  }
}

// The most columns a column option may name: far beyond any real table, small enough that counts derived
// from it cannot overflow.
constexpr long kMaxColumnIndex = 1 << 20;

int resolve_column(const std::string& column, const std::vector<std::string>& header, bool has_header,
                   const std::string& path, const char* flag) {
  if (column.empty()) return -1;
  if (text::trim(column).empty()) throw UsageError(str(flag, ": expected a column name or index, got '", column, "'"));
  if (has_header) {
    auto it = std::find(header.begin(), header.end(), column);
    if (it != header.end()) return static_cast<int>(it - header.begin());
    std::string names;
    for (const auto& name : header) names += (names.empty() ? "" : ", ") + name;
    throw DataError(at_line(path, 1, str(flag, " '", column, "' is not a column; the header has: ", names)));
  }
  char* end = nullptr;
  errno = 0;
  long index = std::strtol(column.c_str(), &end, 10);
  if (*end != '\0' || index < 0 || errno == ERANGE || index > kMaxColumnIndex) {
    throw UsageError(str(flag, " '", column, "': a file without a header needs a 0-based column index (0 to ",
                         kMaxColumnIndex, ")"));
  }
  return static_cast<int>(index);
}

std::string json_field_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "1" : "0";
  return value.dump();
}

TaskData read_jsonl(const std::string& path, const TableOptions& table, const ReadOptions& options) {
  if (table.text_column.empty()) throw UsageError("--text-column: expected a JSON key, got an empty string");
  TaskData data;
  data.path = path;
  data.labeled = !table.label_column.empty();
  LineReader reader(path);
  std::string line;
  bool label_seen = false;
  while (reader.next(&line)) {
    if (trim(line).empty()) continue;
    auto bad_row = [&](const std::string& problem) {
      if (!options.skip_bad_rows) throw DataError(at_line(path, reader.line_number(), problem));
      ++data.skipped_rows;
    };
    if (std::string problem = text::utf8_problem(line); !problem.empty()) {
      bad_row(problem);
      continue;
    }
    nlohmann::json object;
    try {
      object = parse_json_input(line);
    } catch (const JsonInputError& error) {
      bad_row(error.byte() ? str("invalid JSON at column ", error.byte(), ": ", error.what())
                           : str("invalid JSON: ", error.what()));
      continue;
    }
    if (!object.is_object()) {
      bad_row("expected a JSON object");
      continue;
    }
    auto get = [&](const std::string& key, std::string* out) {
      if (key.empty()) return true;
      if (!object.contains(key) || object[key].is_null()) return false;
      *out = json_field_text(object[key]);
      return true;
    };
    TaskExample example;
    example.line = reader.line_number();
    example.id = std::to_string(reader.line_number());
    std::string missing;
    if (!get(table.text_column, &example.text_a)) missing = table.text_column;
    if (!get(table.text_pair_column, &example.text_b)) missing = table.text_pair_column;
    if (!table.id_column.empty() && !get(table.id_column, &example.id)) missing = table.id_column;
    if (data.labeled) {
      if (get(table.label_column, &example.label)) {
        label_seen = true;
      } else {
        missing = table.label_column;
      }
    }
    if (!missing.empty()) {
      bad_row(str("the object has no key \"", missing, "\""));
      continue;
    }
    data.examples.push_back(std::move(example));
  }
  if (data.labeled && !label_seen && data.examples.empty() && data.skipped_rows == 0) data.labeled = false;
  return data;
}

}  // namespace

TaskData read_table(const std::string& path, const TableOptions& table, const ReadOptions& options) {
  if (table.format == TableFormat::kJsonl) return read_jsonl(path, table, options);
  TaskData data;
  data.path = path;
  if (table.text_column.empty())
    throw UsageError("--text-column: expected a column name or index, got an empty string");
  LineReader reader(path);
  std::vector<std::string> fields, header;
  uint64_t line_number = 0, error_line = 0;
  auto next_row = [&](std::string* error) -> bool {
    if (table.format == TableFormat::kCsv) {
      return read_csv_record(reader, &fields, &line_number, error, &error_line);
    }
    std::string line;
    if (!reader.next(&line)) return false;
    line_number = error_line = reader.line_number();
    *error = text::utf8_problem(line);
    fields = split_tabs(line);
    return true;
  };
  std::string error;
  if (table.header) {
    if (!next_row(&error)) throw DataError(str(path, ": empty file, expected a header row"));
    if (!error.empty()) throw DataError(at_line(path, error_line, error));
    header = fields;
  }
  int text = resolve_column(table.text_column, header, table.header, path, "--text-column");
  int pair = resolve_column(table.text_pair_column, header, table.header, path, "--text-pair-column");
  int id = resolve_column(table.id_column, header, table.header, path, "--id-column");
  int label = -1;
  if (!table.label_column.empty()) {
    if (table.header && std::find(header.begin(), header.end(), table.label_column) == header.end()) {
      data.labeled = false;  // an unlabelled (test) file
    } else {
      label = resolve_column(table.label_column, header, table.header, path, "--label-column");
    }
  } else {
    data.labeled = false;
  }
  size_t needed = static_cast<size_t>(std::max({text, pair, label, id}) + 1);
  bool first_row = true;
  while (true) {
    error.clear();
    if (!next_row(&error)) break;
    auto bad_row = [&](const std::string& problem, uint64_t line) {
      if (!options.skip_bad_rows) throw DataError(at_line(path, line, problem));
      ++data.skipped_rows;
    };
    if (!error.empty()) {
      bad_row(error, error_line);
      continue;
    }
    if (fields.size() == 1 && trim(fields[0]).empty()) continue;  // blank line
    if (first_row && !table.header && fields.size() < needed) {
      // Without a header the indices are judged against the first row: a typo in an option, not a bad row.
      const char* flag = needed == static_cast<size_t>(text + 1)    ? "--text-column"
                         : needed == static_cast<size_t>(pair + 1)  ? "--text-pair-column"
                         : needed == static_cast<size_t>(label + 1) ? "--label-column"
                                                                    : "--id-column";
      throw UsageError(str(flag, " ", needed - 1, ": ", at_line(path, line_number, ""), "the first row has ",
                           fields.size(), " fields (indices 0 to ", fields.size() - 1, ")"));
    }
    first_row = false;
    if (fields.size() < needed) {
      bad_row(str("expected at least ", needed, " fields, got ", fields.size()), line_number);
      continue;
    }
    if (table.header && fields.size() > header.size()) {
      // More fields than columns: a separator inside a text shifts the row, its label would be a piece of text.
      bad_row(
          str("expected ", header.size(), " fields as the header has, got ", fields.size(),
              table.format == TableFormat::kCsv ? " (a comma inside an unquoted text?)" : " (a tab inside a text?)"),
          line_number);
      continue;
    }
    TaskExample example;
    example.line = line_number;
    example.id = id >= 0 ? fields[id] : std::to_string(line_number);
    example.text_a = fields[text];
    if (pair >= 0) example.text_b = fields[pair];
    if (label >= 0) {
      example.label = trim(fields[label]);
      if (example.label.empty()) {
        bad_row("empty label", line_number);
        continue;
      }
    }
    data.examples.push_back(std::move(example));
  }
  return data;
}

TaskDefinition generic_task(const std::string& name, TaskKind kind, bool pair, std::vector<std::string> labels,
                            const TaskData* train) {
  TaskDefinition definition;
  definition.name = name;
  definition.kind = kind;
  definition.pair = pair;
  if (kind == TaskKind::kRegression) {
    definition.metrics = {"pearson", "spearman"};
    return definition;
  }
  if (labels.empty() && train != nullptr) {
    std::set<std::string> seen;
    for (const auto& example : train->examples) seen.insert(example.label);
    labels.assign(seen.begin(), seen.end());
    auto is_integer = [](const std::string& s) {
      if (s.empty()) return false;
      char* end = nullptr;
      std::strtoll(s.c_str(), &end, 10);
      return *end == '\0';
    };
    if (std::all_of(labels.begin(), labels.end(), is_integer)) {
      std::sort(labels.begin(), labels.end(), [](const std::string& a, const std::string& b) {
        return std::strtoll(a.c_str(), nullptr, 10) < std::strtoll(b.c_str(), nullptr, 10);
      });
    }
  }
  if (labels.size() < 2) {
    throw DataError(str(train ? train->path : name,
                        ": expected at least two distinct labels for a classification "
                        "task, got ",
                        labels.size()));
  }
  definition.labels = std::move(labels);
  definition.metrics = {"accuracy", "macro_f1"};
  return definition;
}

}  // namespace cabert::tasks

// Parallel text for translation (`cabert finetune --task translation`): two line-aligned files (line i of
// the source translates line i of the target; Multi30k, WMT, IWSLT layouts) or one TSV of
// source<TAB>target rows. Files may be plain or gzip-compressed (told by the gzip magic bytes, not by the
// name). Real files bring a UTF-8 BOM, CRLF line ends and a missing final newline; all are accepted.
// Malformed input is a cabert::DataError naming the file and line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/text/text_source.h"

namespace cabert::tasks {

struct ParallelReadOptions {
  bool skip_bad_rows = false;  // count and drop blank, overlong or non-UTF-8 rows instead of failing
  bool header = false;         // TSV only: the first line names the columns and is skipped
  uint64_t max_pairs = 0;      // keep at most this many pairs; 0 keeps all
  // Longer lines are bad rows: a guard against binary or hostile input (a single "line" of gigabytes).
  uint64_t max_line_bytes = text::max_line_bytes();  // `cabert --max-line-bytes`
};

struct SentencePair {
  std::string source, target;
  uint64_t line = 0;  // 1-based line in the source file (both files, as they are aligned) or the TSV
};

struct ParallelData {
  std::string source_path, target_path;  // the same TSV path twice for read_parallel_tsv
  std::vector<SentencePair> pairs;
  uint64_t skipped_rows = 0;
};

// Reads two line-aligned files. The line counts are always compared over the whole files (also when
// max_pairs stops early), because an extra or missing line shifts every pair after it; a count mismatch
// is reported in preference to a bad row found before it, as it is the likelier cause.
ParallelData read_parallel_files(const std::string& source_path, const std::string& target_path,
                                 const ParallelReadOptions& options = {});

// Reads source<TAB>target rows: tabs only, no quoting, exactly two fields per line.
ParallelData read_parallel_tsv(const std::string& path, const ParallelReadOptions& options = {});

struct ParallelSplitFiles {
  std::string source_path, target_path;
};

// DIR/SPLIT.SRC and DIR/SPLIT.TGT, each plain or with .gz (Multi30k: train.de.gz, val.en.gz,
// test_2016_flickr.de.gz). UsageError naming the paths it looked for, and the splits that DIR does hold,
// when a side is absent; UsageError too when both SPLIT.LANG and SPLIT.LANG.gz exist, as they may differ.
ParallelSplitFiles find_parallel_split(const std::string& dir, const std::string& split, const std::string& source_lang,
                                       const std::string& target_lang);

}  // namespace cabert::tasks

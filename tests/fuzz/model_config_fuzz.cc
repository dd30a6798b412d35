// The model config loader (lib/config/model_config_text.h, lib/config/validation.h): a .textproto file as
// `pretrain --preset FILE` reads it, validated; a valid config printed and read back unchanged. Lines of
// the input that begin with "#set " are applied as `--set` overrides, after the file as on the command line.
// The same bytes as a binary ModelConfig, as a checkpoint stores it, through the stored-config checks.
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <sstream>
#include <string>
#include <vector>

#include "lib/config/model_config_text.h"
#include "lib/config/validation.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  std::istringstream lines(input);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#set ", 0) == 0) overrides.push_back(line.substr(5));
  }
  const std::string& path = cabert::fuzz::input_file(data, size, ".textproto");
  cabert::fuzz::expect_only<cabert::UsageError>("model config", [&] {
    cabert::pb::ModelConfig config = cabert::config::load_model_config(path, overrides);
    // Valid: what --dump-config prints must read back as the same config.
    cabert::pb::ModelConfig again =
        cabert::config::parse_model_config_text(cabert::config::config_to_text(config), "dump");
    google::protobuf::util::DefaultFieldComparator nan_equal;  // a NaN the validation lets through
    nan_equal.set_treat_nan_as_equal(true);
    google::protobuf::util::MessageDifferencer differencer;
    differencer.set_field_comparator(&nan_equal);
    if (!differencer.Compare(config, again)) __builtin_trap();
  });
  // A config stored in a checkpoint (binary protobuf) goes through the same checks, as bad data.
  cabert::pb::ModelConfig stored;
  if (stored.ParseFromArray(data, static_cast<int>(size))) {
    cabert::fuzz::expect_only<cabert::DataError>("stored model config",
                                                 [&] { cabert::config::validate_stored_model_config(stored, "fuzz"); });
  }
  return 0;
}

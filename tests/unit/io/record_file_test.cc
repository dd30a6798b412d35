#include "lib/io/record_file.h"

#include <zstd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "formats/corpus.pb.h"
#include "formats/text.pb.h"
#include "lib/core/errors.h"
#include "lib/core/run_context.h"
#include "tests/test_paths.h"

namespace cabert::io {
namespace {

using cabert::testing::data_error_message;
using cabert::testing::read_text;
using cabert::testing::temp_dir;
using cabert::testing::write_text;

pb::TokenizedText make_record(int index) {
  pb::TokenizedText record;
  record.set_line(index + 1);
  for (int i = 0; i <= index % 50; ++i) record.add_ids(index * 7 + i);
  return record;
}

// Writes `count` records with small frames so that the file has many frames.
std::string write_records(const std::string& path, int count, size_t frame_bytes = 256) {
  WriterOptions options;
  options.frame_bytes = frame_bytes;
  RecordWriter writer(path, "cabert.pb.TokenizedText", {{"tokenizer_checksum", "abc"}}, options);
  for (int i = 0; i < count; ++i) writer.write(make_record(i));
  writer.close();
  return read_text(path);
}

void read_all(const std::string& path, std::vector<pb::TokenizedText>* out = nullptr) {
  RecordReader reader(path);
  reader.expect("cabert.pb.TokenizedText");
  pb::TokenizedText record;
  while (reader.next(&record)) {
    if (out) out->push_back(record);
  }
}

TEST(RecordFile, RoundTripKeepsRecordsHeaderAndCounts) {
  std::string path = temp_dir() + "/tokens.cbr";
  run_context().argv = {"cabert", "tokenize", "encode"};
  run_context().options = {{"model", "m.model"}};
  write_records(path, 1000);
  std::vector<pb::TokenizedText> records;
  RecordReader reader(path);
  EXPECT_EQ(reader.header().message_type(), "cabert.pb.TokenizedText");
  EXPECT_EQ(reader.header().schema_version(), 1u);
  EXPECT_EQ(reader.header().argv_size(), 3);
  EXPECT_EQ(reader.header().options().at("model"), "m.model");
  EXPECT_EQ(reader.header().metadata().at("tokenizer_checksum"), "abc");
  pb::TokenizedText record;
  while (reader.next(&record)) records.push_back(record);
  ASSERT_EQ(records.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(records[i].SerializeAsString(), make_record(i).SerializeAsString()) << "record " << i;
  }
  EXPECT_EQ(reader.footer().record_count(), 1000u);
  EXPECT_GT(reader.footer().frame_count(), 10u);
}

TEST(RecordFile, EmptyFileWithNoRecordsIsValid) {
  std::string path = temp_dir() + "/empty.cbr";
  write_records(path, 0);
  std::vector<pb::TokenizedText> records;
  read_all(path, &records);
  EXPECT_TRUE(records.empty());
}

TEST(RecordFile, DisjointFrameSelectionsPartitionTheRecords) {
  std::string path = temp_dir() + "/tokens.cbr";
  write_records(path, 500);
  std::vector<uint64_t> seen;
  for (uint32_t phase = 0; phase < 3; ++phase) {
    RecordReader reader(path);
    reader.select_frames(phase, 3);
    pb::TokenizedText record;
    while (reader.next(&record)) seen.push_back(record.line());
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 500u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i + 1);
}

TEST(RecordFile, EveryTruncationIsReportedWithNameAndOffset) {
  std::string dir = temp_dir();
  std::string bytes = write_records(dir + "/full.cbr", 300);
  // Every cut point: inside the magic, a marker, a frame, and exactly at frame boundaries.
  for (size_t cut = 1; cut < bytes.size(); cut += 7) {
    std::string path = dir + "/cut.cbr";
    write_text(path, bytes.substr(0, cut));
    std::string message = data_error_message([&] { read_all(path); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    bool named = message.find("truncated") != std::string::npos || message.find("not a cabert") != std::string::npos;
    EXPECT_TRUE(named) << "cut at " << cut << ": " << message;
  }
  // Cut exactly before the footer: a clean frame boundary that must still be reported.
  std::string path = dir + "/no_footer.cbr";
  size_t footer_marker = bytes.rfind(std::string("\x5B\x2A\x4D\x18", 4));
  write_text(path, bytes.substr(0, footer_marker));
  std::string message = data_error_message([&] { read_all(path); });
  EXPECT_NE(message.find("without the end-of-file frame"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(footer_marker)), std::string::npos) << message;
}

// skip_to_end() checks a whole file without decoding its records: the same count as reading them, and every cut
// point a reader would find only at the end is found up front, from a file and from a pipe alike.
TEST(RecordFile, SkipToEndCountsTheRecordsAndFindsEveryTruncation) {
  std::string dir = temp_dir();
  std::string bytes = write_records(dir + "/full.cbr", 300);
  {
    RecordReader reader(dir + "/full.cbr");
    EXPECT_EQ(reader.skip_to_end(), 300u);
    EXPECT_EQ(reader.footer().record_count(), 300u);
    pb::TokenizedText record;
    EXPECT_FALSE(reader.next(&record));
  }
  RecordReader piped("<pipe>", std::make_unique<std::istringstream>(bytes));
  EXPECT_EQ(piped.skip_to_end(), 300u);
  const size_t header_end = bytes.find(std::string("\x5B\x2A\x4D\x18\x18\0\0\0\x02", 9), 40);
  ASSERT_NE(header_end, std::string::npos);
  for (size_t cut = header_end; cut < bytes.size(); cut += 5) {
    const std::string path = dir + "/cut.cbr";
    write_text(path, bytes.substr(0, cut));
    const std::string message = data_error_message([&] { RecordReader(path).skip_to_end(); });
    EXPECT_NE(message.find(path + ": at byte offset "), std::string::npos) << "cut at " << cut << ": " << message;
    EXPECT_NE(message.find("truncated"), std::string::npos) << "cut at " << cut << ": " << message;
    const std::string piped_message = data_error_message(
        [&] { RecordReader("<pipe>", std::make_unique<std::istringstream>(bytes.substr(0, cut))).skip_to_end(); });
    EXPECT_NE(piped_message.find("truncated"), std::string::npos) << "cut at " << cut << ": " << piped_message;
  }
}

// The footer ends the file: a second file after it (`cat a.cbr b.cbr`) or a stray byte is refused, at its offset,
// not silently left unread.
TEST(RecordFile, BytesAfterTheFooterAreRefused) {
  std::string dir = temp_dir();
  std::string bytes = write_records(dir + "/full.cbr", 30);
  for (const std::string& tail : {bytes, std::string("\n")}) {
    std::string path = dir + "/joined.cbr";
    write_text(path, bytes + tail);
    std::string message = data_error_message([&] { read_all(path); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("byte offset " + std::to_string(bytes.size())), std::string::npos) << message;
    EXPECT_NE(message.find("unexpected bytes after the end-of-file frame"), std::string::npos) << message;
  }
}

TEST(RecordFile, CorruptedBytesAreDetected) {
  std::string dir = temp_dir();
  std::string bytes = write_records(dir + "/full.cbr", 300, 1 << 20);
  int detected = 0, total = 0;
  for (size_t position = 16; position < bytes.size(); position += 13) {
    std::string corrupted = bytes;
    corrupted[position] = static_cast<char>(corrupted[position] ^ 0x5a);
    std::string path = dir + "/bad.cbr";
    write_text(path, corrupted);
    ++total;
    try {
      read_all(path);
      ADD_FAILURE() << "flip at byte " << position << " of " << bytes.size() << " went unnoticed";
    } catch (const DataError& error) {
      ++detected;
      EXPECT_NE(std::string(error.what()).find("byte offset"), std::string::npos) << error.what();
    }
  }
  EXPECT_EQ(detected, total) << "every flipped byte must be caught (zstd checksums + markers)";
}

TEST(RecordFile, WrongTypeIsRefusedWithAReadableSentence) {
  std::string path = temp_dir() + "/tokens.cbr";
  write_records(path, 3);
  RecordReader reader(path);
  try {
    reader.expect("cabert.pb.PretrainingExample");
    FAIL() << "expected a DataError";
  } catch (const DataError& error) {
    EXPECT_EQ(std::string(error.what()), path + ": expected pretraining examples, got tokenized text");
  }
}

TEST(RecordFile, NewerSchemaVersionIsRefused) {
  std::string path = temp_dir() + "/tokens.cbr";
  write_records(path, 3);
  RecordReader original(path);
  pb::Header header = original.header();
  header.set_schema_version(99);
  // The writer always writes the registered version: re-compress the header frame with version 99.
  std::string text = read_text(path);
  std::string magic = text.substr(0, kMagicSize);
  std::string rest = text.substr(kMagicSize);
  uint64_t compressed_size = 0;
  for (int i = 7; i >= 0; --i) compressed_size = (compressed_size << 8) | static_cast<unsigned char>(rest[16 + i]);
  std::string after_header = rest.substr(32 + compressed_size);
  std::string serialized = header.SerializeAsString();
  std::string compressed(ZSTD_compressBound(serialized.size()), '\0');
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  size_t size = ZSTD_compress2(context, compressed.data(), compressed.size(), serialized.data(), serialized.size());
  ZSTD_freeCCtx(context);
  std::string marker = rest.substr(0, 32);
  for (int i = 0; i < 8; ++i) marker[16 + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i) marker[24 + i] = static_cast<char>((serialized.size() >> (8 * i)) & 0xff);
  write_text(path, magic + marker + compressed.substr(0, size) + after_header);
  RecordReader reader(path);
  std::string message = data_error_message([&] { reader.expect("cabert.pb.TokenizedText"); });
  EXPECT_NE(message.find("schema version 99"), std::string::npos) << message;
  EXPECT_NE(message.find("reads up to version 1"), std::string::npos) << message;
}

TEST(RecordFile, PlainTextIsNotARecordFile) {
  std::string path = temp_dir() + "/text.txt";
  write_text(path, "hello world\nthis is text\n");
  std::string message = data_error_message([&] { RecordReader reader(path); });
  EXPECT_EQ(message, path + ": at byte offset 0: not a cabert record file (no cabert magic)");
}

TEST(RecordFile, InterruptedWriterLeavesNothingUnderTheFinalName) {
  std::string dir = temp_dir();
  std::string path = dir + "/out.cbr";
  {
    RecordWriter writer(path, "cabert.pb.TokenizedText");
    writer.write(make_record(1));
    // destroyed without close(): as when an exception unwinds
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(RecordFile, ReadsFromAStreamWithASniffedPrefix) {
  std::string path = temp_dir() + "/tokens.cbr";
  std::string bytes = write_records(path, 20);
  auto stream = std::make_unique<std::istringstream>(bytes.substr(kMagicSize));
  ASSERT_TRUE(starts_with_record_magic(bytes.substr(0, kMagicSize)));
  RecordReader reader("<pipe>", prepend(bytes.substr(0, kMagicSize), std::move(stream)));
  pb::TokenizedText record;
  int count = 0;
  while (reader.next(&record)) ++count;
  EXPECT_EQ(count, 20);
}

// ---- growing files (Header.appended: metrics.cabert) ----

// Reads every record; returns how many, with `unfinished` set from the reader.
int read_growing(const std::string& path, bool* unfinished) {
  RecordReader reader(path);
  pb::TokenizedText record;
  int count = 0;
  while (reader.next(&record)) {
    EXPECT_EQ(record.SerializeAsString(), make_record(count).SerializeAsString()) << "record " << count;
    ++count;
  }
  *unfinished = reader.unfinished();
  return count;
}

WriterOptions growing() {
  WriterOptions options;
  options.appended = true;
  return options;
}

TEST(RecordFile, GrowingFileIsReadableAfterEveryFlushAndCompleteAfterClose) {
  std::string dir = temp_dir();
  std::string path = dir + "/metrics.cbr";
  RecordWriter writer(path, "cabert.pb.TokenizedText", {}, growing());
  EXPECT_FALSE(std::filesystem::exists(path)) << "visible before its first flush";
  bool unfinished = false;
  for (int i = 0; i < 5; ++i) {
    writer.write(make_record(i));
    writer.flush();
    EXPECT_EQ(read_growing(path, &unfinished), i + 1);
    EXPECT_TRUE(unfinished);
  }
  writer.write(make_record(5));  // not flushed: not visible yet
  EXPECT_EQ(read_growing(path, &unfinished), 5);
  writer.close();
  EXPECT_EQ(read_growing(path, &unfinished), 6);
  EXPECT_FALSE(unfinished);
  RecordReader reader(path);
  EXPECT_TRUE(reader.header().appended());
}

TEST(RecordFile, GrowingFileCutAnywhereReadsItsCompleteFrames) {
  std::string dir = temp_dir();
  std::string path = dir + "/metrics.cbr";
  std::vector<size_t> frame_ends;  // file size after each flush: record i + 1 complete
  {
    RecordWriter writer(path, "cabert.pb.TokenizedText", {}, growing());
    for (int i = 0; i < 40; ++i) {
      writer.write(make_record(i));
      writer.flush();
      frame_ends.push_back(std::filesystem::file_size(path));
    }
    // destroyed without close(): as a killed writer leaves it (a flushed growing file stays)
  }
  std::string bytes = read_text(path);
  ASSERT_EQ(bytes.size(), frame_ends.back());
  for (size_t cut = frame_ends.front(); cut <= bytes.size(); cut += 5) {
    std::string cut_path = dir + "/cut.cbr";
    write_text(cut_path, bytes.substr(0, cut));
    const int complete =
        static_cast<int>(std::upper_bound(frame_ends.begin(), frame_ends.end(), cut) - frame_ends.begin());
    bool unfinished = false;
    EXPECT_EQ(read_growing(cut_path, &unfinished), complete) << "cut at " << cut;
    EXPECT_TRUE(unfinished);
  }
}

TEST(RecordFile, GrowingFileDamageIsReportedOrEndsTheRecordsNeverMisread) {
  std::string dir = temp_dir();
  std::string path = dir + "/metrics.cbr";
  {
    RecordWriter writer(path, "cabert.pb.TokenizedText", {}, growing());
    for (int i = 0; i < 30; ++i) {
      writer.write(make_record(i));
      writer.flush();
    }
    writer.close();
  }
  std::string bytes = read_text(path);
  int reported = 0, shortened = 0;
  for (size_t position = 16; position < bytes.size(); position += 3) {
    std::string corrupted = bytes;
    corrupted[position] = static_cast<char>(corrupted[position] ^ 0x5a);
    write_text(dir + "/bad.cbr", corrupted);
    try {
      bool unfinished = false;
      // read_growing checks every record it returns against what was written.
      int count = read_growing(dir + "/bad.cbr", &unfinished);
      // A damaged frame size can only make the file look unfinished, with the records before it.
      EXPECT_TRUE(unfinished && count < 30) << "flip at byte " << position << " went unnoticed";
      ++shortened;
    } catch (const DataError& error) {
      EXPECT_NE(std::string(error.what()).find("byte offset"), std::string::npos) << error.what();
      ++reported;
    }
  }
  EXPECT_GT(reported, 5 * shortened) << "checksums and markers catch nearly every flip";
}

TEST(RecordFile, AFileWithoutTheAppendedFlagStillNeedsItsFooter) {
  std::string dir = temp_dir();
  std::string bytes = write_records(dir + "/full.cbr", 10);
  size_t footer_marker = bytes.rfind(std::string("\x5B\x2A\x4D\x18", 4));
  write_text(dir + "/cut.cbr", bytes.substr(0, footer_marker));
  std::string message = data_error_message([&] { read_all(dir + "/cut.cbr"); });
  EXPECT_NE(message.find("without the end-of-file frame"), std::string::npos) << message;
}

}  // namespace
}  // namespace cabert::io

// The Megatron indexed dataset reader (data/indexed_dataset.h): a file built byte by byte here as
// Megatron's _IndexWriter lays it out (independently of dlperf's writer) reads back; dlperf's
// writer round-trips in both dtypes; every malformed input is a usage error naming the file and
// the fault.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"
#include "data/indexed_dataset.h"

namespace dlperf::data {
namespace {

class IndexedDatasetTest : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("dlperf_idx_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string prefix(const char* name) const { return (dir / name).string(); }

  template <class T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  // Megatron's layout: magic, version, dtype code, S, D, lengths (i32), pointers (i64), doc index (i64).
  static std::string index(uint64_t version, uint8_t code, const std::vector<int32_t>& lengths, const std::vector<int64_t>& docs,
                           size_t item) {
    std::string s("MMIDIDX\0\0", 9);
    put(s, version), put(s, code), put(s, static_cast<uint64_t>(lengths.size())), put(s, static_cast<uint64_t>(docs.size()));
    for (int32_t l : lengths) put(s, l);
    int64_t off = 0;
    for (int32_t l : lengths) put(s, off), off += l * static_cast<int64_t>(item);
    for (int64_t d : docs) put(s, d);
    return s;
  }
  static void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

  // Expects the usage error naming `file` and containing `what`.
  static void expect_fault(const std::string& p, int64_t vocab, const std::string& file, const std::string& what) {
    try {
      IndexedDataset d(p, vocab);
      ADD_FAILURE() << "no error, want " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage);
      const std::string m = e.what();
      EXPECT_EQ(m.find(file + ": "), 0u) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
};

TEST_F(IndexedDatasetTest, ReadsMegatronsLayoutByteForByte) {
  // Two documents: the first of two sequences (3 and 2 tokens), the second of one (4), uint16.
  const std::string p = prefix("meg");
  write(p + ".idx", index(1, 8, {3, 2, 4}, {0, 2, 3}, 2));
  std::string bin;
  for (uint16_t t : {10, 11, 12, 20, 21, 30, 31, 32, 65535}) put(bin, t);
  write(p + ".bin", bin);
  IndexedDataset d(p, 65536);
  EXPECT_EQ(d.tokens(), 9);
  EXPECT_EQ(d.sequences(), 3);
  EXPECT_EQ(d.documents(), 2);
  EXPECT_EQ(d.token(0), 10);
  EXPECT_EQ(d.token(3), 20);
  EXPECT_EQ(d.token(8), 65535);  // unsigned
  // multimodal files carry one mode byte per sequence after the document index: accepted
  write(p + ".idx", index(1, 8, {3, 2, 4}, {0, 2, 3}, 2) + std::string(3, '\0'));
  EXPECT_EQ(IndexedDataset(p, 65536).tokens(), 9);
}

TEST_F(IndexedDatasetTest, WriterRoundTripsBothDtypes) {
  for (int32_t big : {1000, 70000}) {  // uint16, then int32
    const std::string p = prefix(big < 65536 ? "rt16" : "rt32");
    write_indexed_dataset(p, {{1, 2, 3}, {}, {big, 0}});
    IndexedDataset d(p, big + 1);
    EXPECT_EQ(d.dtype_code(), big < 65536 ? 8 : 4);
    EXPECT_EQ(d.documents(), 3);
    ASSERT_EQ(d.tokens(), 5);
    EXPECT_EQ(d.token(3), big);
    EXPECT_EQ(d.token(4), 0);
  }
}

// An earlier dataset is never written over: its .bin was emptied when the .idx could not be
// written (a folder of that name), leaving half a dataset and a message naming no file.
TEST_F(IndexedDatasetTest, WriterKeepsEarlierFilesAndLeavesNothingHalfWritten) {
  const std::string p = prefix("keep");
  write_indexed_dataset(p, {{1, 2, 3}});
  const auto bin_size = std::filesystem::file_size(p + ".bin");
  std::filesystem::remove(p + ".idx");
  std::filesystem::create_directory(p + ".idx");
  const auto refused = [](const std::string& q, const std::string& what) {
    try {
      write_indexed_dataset(q, {{4, 5}});
      ADD_FAILURE() << q << " written";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(p, p + ".bin already exists");
  EXPECT_EQ(std::filesystem::file_size(p + ".bin"), bin_size);
  std::filesystem::remove(p + ".bin");
  refused(p, p + ".idx already exists");
  EXPECT_FALSE(std::filesystem::exists(p + ".bin"));
  refused("/nonexistent-dlperf/t", "/nonexistent-dlperf/t.bin: cannot write: No such file or directory");
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(p).parent_path()))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  std::filesystem::remove(p + ".idx");
}

// A .bin cut short while mapped: the next read past its new end raised SIGBUS and the process
// died with MPI's backtrace, naming nothing. Now one line naming the file, exit 3.
TEST_F(IndexedDatasetTest, FileCutShortWhileMappedIsOneLineAndExit3) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string p = prefix("cut");
  std::vector<int32_t> doc(1 << 16);  // 128 KiB of uint16 tokens: 32 pages
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int32_t>(i % 1000);
  write_indexed_dataset(p, {doc});
  for (int k = 0; k < 40; ++k) write_indexed_dataset(prefix("many") + std::to_string(k), {{1, 2, 3}});
  EXPECT_EXIT(
      {
        // 40 datasets (80 mappings) open beside it: the guard holds any number.
        std::vector<std::unique_ptr<IndexedDataset>> others;
        for (int k = 0; k < 40; ++k) others.push_back(std::make_unique<IndexedDataset>(prefix("many") + std::to_string(k), 1000));
        IndexedDataset d(p, 1000);
        std::filesystem::resize_file(p + ".bin", 100);
        std::fprintf(stderr, "read %lld\n", static_cast<long long>(d.token(d.tokens() - 1)));
      },
      ::testing::ExitedWithCode(3), "^dlperf-train: [^ ]*/cut\\.bin changed or failed while the run read it \\(cut short");
}

TEST_F(IndexedDatasetTest, MalformedInputsAreOneLineUsageErrors) {
  const std::string p = prefix("bad"), idx = p + ".idx", bin = p + ".bin";
  const std::string good = index(1, 8, {3, 2}, {0, 1, 2}, 2);
  std::string tokens;
  for (uint16_t t : {1, 2, 3, 4, 5}) put(tokens, t);
  write(bin, tokens);
  write(idx, good.substr(0, 20));
  expect_fault(p, 100, idx, "truncated");
  write(idx, good.substr(0, good.size() - 4));
  expect_fault(p, 100, idx, "truncated");
  write(idx, "NOTANIDX" + good.substr(8));
  expect_fault(p, 100, idx, "wrong magic");
  write(idx, index(2, 8, {3, 2}, {0, 1, 2}, 2));
  expect_fault(p, 100, idx, "version 2");
  write(idx, index(1, 7, {3, 2}, {0, 1, 2}, 4));
  expect_fault(p, 100, idx, "dtype code 7 is a float type");
  write(idx, index(1, 42, {3, 2}, {0, 1, 2}, 2));
  expect_fault(p, 100, idx, "dtype code 42 is unknown");
  write(idx, index(1, 8, {3, 2}, {0, 2, 1}, 2));
  expect_fault(p, 100, idx, "document index");
  write(idx, good);
  write(bin, tokens.substr(0, 8));
  expect_fault(p, 100, bin, "truncated or mismatched");
  write(bin, tokens);
  expect_fault(p, 5, bin, "token 4 is id 5, outside the vocabulary [0, 5)");
  std::filesystem::remove(bin);
  expect_fault(p, 100, bin, "cannot open");
  ASSERT_EQ(::mkfifo(bin.c_str(), 0600), 0);  // opening it blocked for ever
  expect_fault(p, 100, bin, "not a regular file");
}

}  // namespace
}  // namespace dlperf::data

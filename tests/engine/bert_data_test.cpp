// BERT data: a tiny pretraining shard in NVIDIA's HDF5 layout, written here with the HDF5 C
// API, is read back and trained on; a missing dataset, a wrong shape or a missing path is a
// one-line usage error; the BERT command-line flags are validated with errors naming the flag.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/error.h"
#include "models/bert.h"
#include "trace/h5_handle.h"
#include "train/optim/adam.h"
#include "train/feed/bert_data.h"
#include "train/options.h"
#include "train/param_store.h"

namespace dlperf {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("dlperf_bert_data_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

void write_dataset(hid_t file, const char* name, const std::vector<hsize_t>& dims, const std::vector<int32_t>& v, hid_t type) {
  auto space = DLPERF_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  auto d = DLPERF_H5(H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  DLPERF_CHECK_HDF5(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
}

// N samples of sequence S with P slots, NVIDIA's dtypes (int64 ids, int8 mask/segments).
// skip: a dataset left out; bad_seq: input_mask written with this many columns instead.
void write_shard(const fs::path& p, int64_t N, int64_t S, int64_t P, const std::string& skip = "", int64_t bad_seq = 0) {
  auto f = DLPERF_H5(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  const auto n = static_cast<hsize_t>(N), s = static_cast<hsize_t>(S), pp = static_cast<hsize_t>(P);
  std::vector<int32_t> ids(N * S), mask(N * S), seg(N * S), pos(N * P, 0), lm(N * P, 0), nsp(N);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t len = S - (i % 3);
    for (int64_t t = 0; t < len; ++t) {
      ids[i * S + t] = static_cast<int32_t>(5 + (i + 2 * t) % 50);
      mask[i * S + t] = 1;
      seg[i * S + t] = t >= len / 2;
    }
    for (int64_t k = 0; k < P - (i % 2); ++k) {
      pos[i * P + k] = static_cast<int32_t>(1 + 2 * k);
      lm[i * P + k] = ids[i * S + 1 + 2 * k];
      ids[i * S + 1 + 2 * k] = 4;
    }
    nsp[i] = static_cast<int32_t>(i % 2);
  }
  const auto put = [&](const char* name, const std::vector<hsize_t>& dims, const std::vector<int32_t>& v, hid_t type) {
    if (skip != name) write_dataset(f, name, dims, v, type);
  };
  put("input_ids", {n, s}, ids, H5T_STD_I64LE);
  if (bad_seq) put("input_mask", {n, static_cast<hsize_t>(bad_seq)}, std::vector<int32_t>(N * bad_seq, 1), H5T_STD_I8LE);
  else put("input_mask", {n, s}, mask, H5T_STD_I8LE);
  put("segment_ids", {n, s}, seg, H5T_STD_I8LE);
  put("masked_lm_positions", {n, pp}, pos, H5T_STD_I64LE);
  put("masked_lm_ids", {n, pp}, lm, H5T_STD_I64LE);
  put("next_sentence_labels", {n}, nsp, H5T_STD_I8LE);
}

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage) << e.what();
    const std::string w = e.what();
    EXPECT_EQ(w.find('\n'), std::string::npos) << "one line: " << w;
    return w;
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(BertShardData, ReadsNvidiaLayoutAndTrains) {
  TempDir dir;
  write_shard(dir.path / "part_00.hdf5", 10, 16, 3);
  write_shard(dir.path / "part_01.hdf5", 6, 16, 3);
  BertShards shards(dir.path.string(), {4, 16, 3, 64}, 0);
  ASSERT_EQ(shards.files().size(), 2u);
  const HostBatch& b = shards.next();
  EXPECT_EQ(b.ints.at("input_ids").size(), 64u);
  EXPECT_EQ(b.ints.at("input_ids")[1], 4);               // sample 0, position 1 is [MASK]
  EXPECT_EQ(b.ints.at("masked_lm_positions")[1], 3);     // slot 1 at position 3
  EXPECT_EQ(b.ints.at("next_sentence_labels")[1], 1);
  EXPECT_EQ(b.ints.at("input_mask")[16 + 15], 0);         // sample 1 has 15 real tokens
  // The shards staged elsewhere are the same data; a shard of another length is not.
  std::filesystem::create_directories(dir.path / "staged");
  for (const char* f : {"part_00.hdf5", "part_01.hdf5"}) std::filesystem::copy_file(dir.path / f, dir.path / "staged" / f);
  EXPECT_EQ(BertShards((dir.path / "staged").string(), {4, 16, 3, 64}, 1).fingerprint(), shards.fingerprint());
  write_shard(dir.path / "staged" / "part_01.hdf5", 8, 16, 3);
  EXPECT_NE(BertShards((dir.path / "staged").string(), {4, 16, 3, 64}, 0).fingerprint(), shards.fingerprint());
  std::filesystem::remove_all(dir.path / "staged");

  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  BertConfig c;
  c.layers = 1, c.hidden = 32, c.heads = 2, c.intermediate = 64, c.vocab = 64, c.positions = 32;
  c.batch = 4, c.seq_len = 16, c.max_predictions = 3, c.dropout = 0.0f;
  auto model = make_bert(*be, c);
  ParamStore store(*be, model->layers());
  model->init_params(1);
  Lamb opt(*be, store, {});
  std::vector<float> losses;
  for (int s = 0; s < 12; ++s) {  // 48 samples: cycles through both files more than twice
    model->load(shards.next());
    model->forward();
    losses.push_back(model->loss());
    model->backward(1.0f, [](const Layer&) {});
    opt.step(0.02f, 1.0f);
  }
  for (float l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), losses.front());
}

// The shards' batches are dealt out to the ranks in turn: each rank reads samples of its own
// (rank r started at sample r x batch and read on from there, so rank 1's step s was rank 0's
// step s + 1: 2 ranks read the same samples, one step apart), across the files' boundary.
TEST(BertShardData, RanksReadDisjointBatches) {
  TempDir dir;
  write_shard(dir.path / "part_00.hdf5", 10, 16, 3);  // a sample's first token is 5 + its index in its file
  write_shard(dir.path / "part_01.hdf5", 6, 16, 3);
  const auto firsts = [&](int rank, int world, int batches) {
    BertShards shards(dir.path.string(), {4, 16, 3, 64}, rank, world);
    std::vector<int> out;
    for (int b = 0; b < batches; ++b) {
      const auto& ids = shards.next().ints.at("input_ids");
      for (int n = 0; n < 4; ++n) out.push_back(ids[static_cast<size_t>(n) * 16] - 5);
    }
    return out;
  };
  // 16 samples, 2 ranks x 4: rank 0 reads global samples 0-3 and 8-11, rank 1 4-7 and 12-15, then again.
  EXPECT_EQ(firsts(0, 2, 3), (std::vector<int>{0, 1, 2, 3, 8, 9, 0, 1, 0, 1, 2, 3}));
  EXPECT_EQ(firsts(1, 2, 3), (std::vector<int>{4, 5, 6, 7, 2, 3, 4, 5, 4, 5, 6, 7}));
  // One rank reads them all in order.
  EXPECT_EQ(firsts(0, 1, 4), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}));
  // Fewer samples than ranks x batch: refused, not the same samples on several ranks.
  const std::string w = usage_error([&] { BertShards(dir.path.string(), {4, 16, 3, 64}, 0, 5); });
  EXPECT_NE(w.find("16 samples, fewer than ranks x --batch-size (5 x 4)"), std::string::npos) << w;
  // A shard reached through a second name (a hard link, a symbolic link) is read once.
  fs::create_hard_link(dir.path / "part_01.hdf5", dir.path / "part_02.hdf5");
  fs::create_symlink(dir.path / "part_00.hdf5", dir.path / "part_03.hdf5");
  EXPECT_EQ(BertShards(dir.path.string(), {4, 16, 3, 64}, 0, 2).files().size(), 2u);
}

TEST(BertShardData, BadShardsAreOneLineUsageErrors) {
  TempDir dir;
  write_shard(dir.path / "no_nsp.hdf5", 4, 16, 3, "next_sentence_labels");
  auto w = usage_error([&] { BertShards((dir.path / "no_nsp.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("'next_sentence_labels' is missing"), std::string::npos) << w;
  write_shard(dir.path / "no_ids.hdf5", 4, 16, 3, "masked_lm_ids");
  w = usage_error([&] { BertShards((dir.path / "no_ids.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("'masked_lm_ids' is missing"), std::string::npos) << w;
  write_shard(dir.path / "short.hdf5", 4, 16, 3, "", 12);
  w = usage_error([&] { BertShards((dir.path / "short.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("'input_mask' has shape (4, 12), want (4, 16)"), std::string::npos) << w;
  write_shard(dir.path / "ok.hdf5", 4, 16, 3);
  w = usage_error([&] { BertShards((dir.path / "ok.hdf5").string(), {2, 128, 3, 64}, 0); });  // --seq-len 128
  EXPECT_NE(w.find("--seq-len"), std::string::npos) << w;
  w = usage_error([&] { BertShards((dir.path / "missing").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("no such file or directory"), std::string::npos) << w;
  fs::create_directories(dir.path / "empty");
  w = usage_error([&] { BertShards((dir.path / "empty").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("no .hdf5"), std::string::npos) << w;
  // A FIFO exists: it is not "no such file" (and must not block the open).
  ASSERT_EQ(::mkfifo((dir.path / "fifo.hdf5").c_str(), 0600), 0);
  w = usage_error([&] { BertShards((dir.path / "fifo.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("not a regular file or folder"), std::string::npos) << w;
  // An id outside the vocabulary names the flag that sets it.
  write_shard(dir.path / "ok.hdf5", 4, 16, 3);
  w = usage_error([&] { BertShards((dir.path / "ok.hdf5").string(), {2, 16, 3, 20}, 0); });  // --bert-vocab 20
  EXPECT_NE(w.find("input_ids of sample"), std::string::npos) << w;
  EXPECT_NE(w.find("(token ids must lie inside --bert-vocab)"), std::string::npos) << w;
}

// A shard with the wrong structure (a converter's bug, another tool's file): one line naming the
// dataset and what is wrong, exit 2, not an internal HDF5 error (exit 3) or the OOM killer.
TEST(BertShardData, WrongStructureIsNamed) {
  TempDir dir;
  const auto replace = [&](const fs::path& p, const char* name, const std::function<void(hid_t)>& make) {
    write_shard(p, 4, 16, 3);
    auto f = DLPERF_H5(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    DLPERF_CHECK_HDF5(H5Ldelete(f, name, H5P_DEFAULT));
    make(f);
  };
  replace(dir.path / "group.hdf5", "input_ids", [](hid_t f) { DLPERF_H5(H5Gcreate2(f, "input_ids", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose); });
  auto w = usage_error([&] { BertShards((dir.path / "group.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("'input_ids' is not a dataset"), std::string::npos) << w;
  replace(dir.path / "nsp_group.hdf5", "next_sentence_labels",
          [](hid_t f) { DLPERF_H5(H5Gcreate2(f, "next_sentence_labels", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose); });
  w = usage_error([&] { BertShards((dir.path / "nsp_group.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("'next_sentence_labels' is not a dataset"), std::string::npos) << w;
  replace(dir.path / "float.hdf5", "masked_lm_ids",
          [](hid_t f) { write_dataset(f, "masked_lm_ids", {4, 3}, std::vector<int32_t>(12, 7), H5T_IEEE_F32LE); });
  w = usage_error([&] { BertShards((dir.path / "float.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("'masked_lm_ids' holds floating-point numbers"), std::string::npos) << w;
  // Rows never written read as HDF5's fill value, 0: a sample with no token at all.
  replace(dir.path / "unwritten.hdf5", "input_mask", [](hid_t f) {
    const hsize_t dims[2] = {4, 16};
    auto space = DLPERF_H5(H5Screate_simple(2, dims, nullptr), H5Sclose);
    DLPERF_H5(H5Dcreate2(f, "input_mask", H5T_STD_I8LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  });
  w = usage_error([&] { BertShards((dir.path / "unwritten.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("sample 0 holds no token (its input_mask starts with 0)"), std::string::npos) << w;
  // 2^40 as an int64: shown as it is (HDF5's conversion to int32 clipped it to 2147483647)
  replace(dir.path / "big.hdf5", "masked_lm_ids", [](hid_t f) {
    std::vector<int64_t> v(12, 7);
    v[4] = int64_t{1} << 40;
    auto space = DLPERF_H5(H5Screate_simple(2, std::array<hsize_t, 2>{4, 3}.data(), nullptr), H5Sclose);
    auto d = DLPERF_H5(H5Dcreate2(f, "masked_lm_ids", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    DLPERF_CHECK_HDF5(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
  });
  w = usage_error([&] { BertShards((dir.path / "big.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("masked_lm_ids of sample 1 is 1099511627776, outside [0, 64)"), std::string::npos) << w;
  // A sparse (chunked, never written) dataset claiming 2^31 samples: a few KiB on disk.
  replace(dir.path / "sparse.hdf5", "next_sentence_labels", [](hid_t f) {
    const hsize_t n = hsize_t{1} << 31, chunk = 1 << 16;
    auto space = DLPERF_H5(H5Screate_simple(1, &n, nullptr), H5Sclose);
    auto plist = DLPERF_H5(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    DLPERF_CHECK_HDF5(H5Pset_chunk(plist, 1, &chunk));
    DLPERF_H5(H5Dcreate2(f, "next_sentence_labels", H5T_STD_I8LE, space, H5P_DEFAULT, plist, H5P_DEFAULT), H5Dclose);
  });
  w = usage_error([&] { BertShards((dir.path / "sparse.hdf5").string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("2147483648 samples need"), std::string::npos) << w;
  EXPECT_NE(w.find("split the shard"), std::string::npos) << w;
}

// A shard cut short (a copy that ran out of space, a truncated download): the error names
// the file, whether it is the first or a later one (every shard is checked at start).
TEST(BertShardData, TruncatedShardNamesItsFile) {
  TempDir dir;
  write_shard(dir.path / "part_00.hdf5", 64, 16, 3);
  write_shard(dir.path / "part_01.hdf5", 64, 16, 3);
  const fs::path cut = dir.path / "part_01.hdf5";
  fs::resize_file(cut, fs::file_size(cut) * 6 / 10);
  auto w = usage_error([&] { BertShards(dir.path.string(), {4, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("--data " + cut.string() + ":"), std::string::npos) << w;
  w = usage_error([&] { BertShards(cut.string(), {4, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("--data " + cut.string() + ":"), std::string::npos) << w;
  std::ofstream(dir.path / "empty.hdf5").flush();
  w = usage_error([&] { BertShards((dir.path / "empty.hdf5").string(), {4, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("empty.hdf5"), std::string::npos) << w;
}

// Values out of range (issue 27 item 11): found when the shard is opened, before the run is
// registered in a results file, so the error is exit 2 with nothing written.
TEST(BertShardData, ValuesOutOfRangeAreUsageErrorsAtStart) {
  TempDir dir;
  const fs::path shard = dir.path / "part_00.hdf5";
  write_shard(shard, 4, 16, 3);  // token ids up to 54, masked positions up to 5
  auto w = usage_error([&] { BertShards(shard.string(), {2, 16, 3, 32}, 0); });  // --bert-vocab 32
  EXPECT_NE(w.find("input_ids of sample 0 is "), std::string::npos) << w;
  EXPECT_NE(w.find("outside [0, 32)"), std::string::npos) << w;
  {  // a masked position past the sequence
    auto f = DLPERF_H5(H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    DLPERF_CHECK_HDF5(H5Ldelete(f, "masked_lm_positions", H5P_DEFAULT));
    std::vector<int32_t> pos(4 * 3, 1);
    pos[7] = 16;
    write_dataset(f, "masked_lm_positions", {4, 3}, pos, H5T_STD_I64LE);
  }
  w = usage_error([&] { BertShards(shard.string(), {2, 16, 3, 64}, 0); });
  EXPECT_NE(w.find("masked_lm_positions of sample 2 is 16, outside [0, 16)"), std::string::npos) << w;
#ifdef DLPERF_TRAIN
  // End to end: exit 2, one line, and no results file.
  const fs::path out = dir.path / "r.h5", err = dir.path / "err.txt";
  const std::string cmd = std::string(DLPERF_TRAIN) + " --model bert_base --data " + shard.string() +
                          " --seq-len 16 --max-predictions 3 --bert-layers 1 --bert-hidden 32 --bert-heads 2 --bert-intermediate 64"
                          " --bert-vocab 64 --batch-size 2 --iterations 2 --warmup 1 --threads 1 --output " + out.string() +
                          " >/dev/null 2>" + err.string();
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << ": " << text;
  EXPECT_NE(text.find("masked_lm_positions of sample 2"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".lock"));
#endif
}

std::string parse_error(std::vector<const char*> args) {
  args.insert(args.begin(), "dlperf-train");
  TrainOptions o;
  std::ostringstream info;
  return usage_error([&] { parse_train_options(static_cast<int>(args.size()), args.data(), o, info); });
}

TEST(BertOptions, DefaultsAndBadValues) {
  const char* argv[] = {"dlperf-train", "--model", "bert_base"};
  TrainOptions o;
  std::ostringstream info;
  ASSERT_EQ(parse_train_options(3, argv, o, info), ParseOutcome::run);
  EXPECT_EQ(o.optimizer, "lamb");
  EXPECT_EQ(o.seq_len, 128);
  EXPECT_EQ(o.max_predictions, 20);
  EXPECT_FLOAT_EQ(o.weight_decay, 0.01f);
  EXPECT_FLOAT_EQ(o.clip_grad_norm, 0.0f);
  EXPECT_NE(parse_error({"--model", "bert_base", "--optimizer", "rmsprop"}).find("--optimizer"), std::string::npos);
  EXPECT_NE(parse_error({"--model", "bert_base", "--seq-len", "0"}).find("--seq-len"), std::string::npos);
  EXPECT_NE(parse_error({"--model", "bert_base", "--seq-len", "1024"}).find("--seq-len"), std::string::npos);
  EXPECT_NE(parse_error({"--model", "bert_base", "--max-predictions", "200"}).find("--max-predictions"), std::string::npos);
  EXPECT_NE(parse_error({"--model", "bert_base", "--clip-grad-norm", "-1"}).find("--clip-grad-norm"), std::string::npos);
  EXPECT_NE(parse_error({"--model", "resnet50", "--data", "x.hdf5"}).find("--data"), std::string::npos);
  EXPECT_NE(parse_error({"--model", "bert_large"}).find("--model"), std::string::npos);
}

}  // namespace
}  // namespace dlperf

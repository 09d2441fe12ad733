#include "train/feed/bert_data.h"

#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/fnv.h"
#include "models/bert.h"
#include "models/init.h"
#include "trace/h5_handle.h"
#include "train/memory/size_limits.h"

namespace dlperf {

namespace {
constexpr int32_t kFirstToken = kBertFirstWord;
constexpr int32_t kMaskId = 4;
}  // namespace

SyntheticTokens::SyntheticTokens(const BertDataShape& sh, uint64_t seed, int pool) {
  Rng rng(seed ^ 0x5851F42D4C957F2Dull);
  const int64_t B = sh.batch, S = sh.seq_len, P = sh.max_predictions;
  const int64_t span = std::max<int64_t>(1, sh.vocab - kFirstToken);
  const auto token = [&](int64_t v) { return static_cast<int32_t>(kFirstToken + ((v % span) + span) % span); };
  for (int p = 0; p < pool; ++p) {
    HostBatch b;
    auto& ids = b.ints["input_ids"];
    auto& seg = b.ints["segment_ids"];
    auto& mask = b.ints["input_mask"];
    auto& pos = b.ints["masked_lm_positions"];
    auto& lm = b.ints["masked_lm_ids"];
    auto& nsp = b.ints["next_sentence_labels"];
    ids.assign(static_cast<size_t>(B * S), 0), seg = mask = ids;
    pos.assign(static_cast<size_t>(B * P), 0), lm = pos;
    nsp.assign(static_cast<size_t>(B), 0);
    for (int64_t n = 0; n < B; ++n) {
      const int64_t len = std::max<int64_t>(std::min<int64_t>(S, 4), S - static_cast<int64_t>(rng.next() % static_cast<uint64_t>(std::max<int64_t>(1, S / 4))));
      const auto label = static_cast<int32_t>(rng.next() % 2);
      nsp[static_cast<size_t>(n)] = label;
      const int64_t start = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(span));
      const int64_t step = 1 + static_cast<int64_t>(rng.next() % 3);
      int32_t* row = ids.data() + n * S;
      for (int64_t t = 0; t < len; ++t) {
        const bool second = t >= len / 2;
        row[t] = token(start + (second && label ? 2 * step : step) * t);
        seg[static_cast<size_t>(n * S + t)] = second ? 1 : 0;
        mask[static_cast<size_t>(n * S + t)] = 1;
      }
      row[0] = 2;  // [CLS]
      // ~15% of the positions 1..len-1, at most P, in increasing order
      int64_t k = 0;
      const int64_t want = std::min<int64_t>(P, std::max<int64_t>(1, (len * 15 + 99) / 100));
      for (int64_t t = 1; t < len && k < want; ++t) {
        if (static_cast<int64_t>(rng.next() % static_cast<uint64_t>(len)) >= want * 2 && len - t > want - k) continue;
        pos[static_cast<size_t>(n * P + k)] = static_cast<int32_t>(t);
        lm[static_cast<size_t>(n * P + k)] = row[t];
        row[t] = kMaskId;
        ++k;
      }
    }
    pool_.push_back(std::move(b));
  }
}

const HostBatch& SyntheticTokens::next() {
  const HostBatch& b = pool_[cursor_];
  cursor_ = (cursor_ + 1) % pool_.size();
  return b;
}

// ---- shards ----------------------------------------------------------------------------------

namespace {

// Checks one 1-D or 2-D integer dataset of the expected (rows, cols) shape (cols 0: 1-D, or
// (N, 1)) and reads it (only checks when `read` is false). Every value read must lie in
// [0, hi), or a one-line error names the file, the dataset, the sample and the value: read as
// 64-bit, so a value past int32 is shown as it is, not as HDF5's clipped 2147483647. An id
// outside the vocabulary or a masked position past the sequence would otherwise be found by the
// embedding mid-step, after the run was registered in the results file (issue 27 item 11).
std::vector<int32_t> read_dataset(hid_t file, const std::string& fname, const char* name, int64_t rows, int64_t cols, int64_t hi,
                                  bool read = true) {
  const std::string what = "--data " + fname + ": dataset '" + name + "'";
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) throw_usage_error(what + " is missing (NVIDIA BERT shard layout expected)");
  // A group or a dangling link of that name: HDF5 refuses to open it as a dataset.
  const hid_t id = H5Dopen2(file, name, H5P_DEFAULT);
  if (id < 0) throw_usage_error(what + " is not a dataset (NVIDIA BERT shard layout expected)");
  auto d = h5::Handle(id, H5Dclose);
  auto space = DLPERF_H5(H5Dget_space(d), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[2] = {0, 0};
  if (rank >= 1 && rank <= 2) H5Sget_simple_extent_dims(space, dims, nullptr);
  auto type = DLPERF_H5(H5Dget_type(d), H5Tclose);
  const H5T_class_t type_class = H5Tget_class(type);
  if (type_class != H5T_INTEGER)
    throw_usage_error(what + " holds " +
                      (type_class == H5T_FLOAT ? "floating-point numbers" : type_class == H5T_STRING ? "strings" : "values that are not integers") +
                      ": token ids, masks, positions and labels are integers");
  const bool ok = cols == 0 ? ((rank == 1 || (rank == 2 && dims[1] == 1)) && static_cast<int64_t>(dims[0]) == rows)
                            : (rank == 2 && static_cast<int64_t>(dims[0]) == rows && static_cast<int64_t>(dims[1]) == cols);
  if (!ok) {
    std::string got = "(";
    for (int i = 0; i < rank; ++i) got += (i ? ", " : "") + std::to_string(dims[i]);
    got += ")";
    throw_usage_error(what + " has shape " + got + ", want (" + std::to_string(rows) + (cols ? ", " + std::to_string(cols) : "") + ")" +
                      (cols ? " (check --seq-len / --max-predictions)" : ""));
  }
  if (!read) return {};
  const int64_t width = std::max<int64_t>(cols, 1);
  std::vector<int64_t> wide(static_cast<size_t>(rows * width));
  if (H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data()) < 0)
    throw_usage_error("--data " + fname + ": cannot read dataset '" + name + "' (truncated or damaged file?)");
  std::vector<int32_t> v(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < 0 || wide[i] >= hi)
      throw_usage_error("--data " + fname + ": " + name + " of sample " + std::to_string(static_cast<int64_t>(i) / width) + " is " +
                        std::to_string(wide[i]) + ", outside [0, " + std::to_string(hi) + ")" +
                        (std::string(name) == "masked_lm_positions" ? std::string(" (positions must lie inside --seq-len)")
                         : hi > 2                                    ? std::string(" (token ids must lie inside --bert-vocab)")
                                                                     : std::string()));
    v[i] = static_cast<int32_t>(wide[i]);
  }
  return v;
}

// An open shard, or a one-line error naming it: HDF5 refuses truncated files at open.
h5::Handle open_shard(const std::string& f) {
  if (H5Fis_hdf5(f.c_str()) <= 0) throw_usage_error("--data " + f + ": not an HDF5 file (or unreadable)");
  const hid_t id = H5Fopen(f.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw_usage_error("--data " + f + ": cannot be opened (truncated or damaged HDF5 file?)");
  return h5::Handle(id, H5Fclose);
}

bool is_shard(const std::filesystem::path& p) {
  const auto e = p.extension().string();
  return e == ".hdf5" || e == ".h5";
}

}  // namespace

BertShards::BertShards(const std::string& path, const BertDataShape& shape, int rank, int world) : shape_(shape) {
  namespace fs = std::filesystem;
  h5::silence_error_stack();
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& f : fs::directory_iterator(path, ec))
      if (f.is_regular_file() && is_shard(f.path())) files_.push_back(f.path().string());
    std::sort(files_.begin(), files_.end());
    if (files_.empty()) throw_usage_error("--data " + path + ": the directory holds no .hdf5 or .h5 files");
    // A shard reached through several names (a symbolic or hard link beside it) would be read as
    // often: kept once, under its first name.
    std::set<std::pair<uint64_t, uint64_t>> seen;
    std::vector<std::string> once, again;
    for (const auto& f : files_) {
      struct stat st {};
      if (::stat(f.c_str(), &st) == 0 && !seen.insert({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)}).second)
        again.push_back(fs::path(f).filename().string());
      else
        once.push_back(f);
    }
    if (!again.empty() && rank == 0)
      std::fprintf(stderr, "dlperf-train: WARNING: --data %s: %zu file(s) are links to shards listed already (first: %s): each shard is read once\n",
                   printable(path).c_str(), again.size(), printable(again.front()).c_str());
    files_ = std::move(once);
  } else if (fs::is_regular_file(path, ec)) {
    files_.push_back(path);
  } else if (fs::exists(path, ec)) {
    throw_usage_error("--data " + path + ": not a regular file or folder (a FIFO, socket or device cannot be a shard)");
  } else {
    throw_usage_error("--data " + path + ": no such file or directory");
  }
  // Every shard is checked now (metadata only), so a damaged one is found before training,
  // on every rank alike, not when some rank first reaches it.
  std::vector<int64_t> samples(files_.size());
  for (size_t i = 1; i < files_.size(); ++i) samples[i] = load_file(i, /*read=*/false);
  samples[0] = load_file(0);
  first_.assign(1, 0);
  for (int64_t n : samples) first_.push_back(first_.back() + n);
  const int64_t total = first_.back(), batch = shape_.batch, ranks = std::max(world, 1);
  if (total < batch * ranks)
    throw_usage_error("--data " + path + ": " + std::to_string(total) + " samples, fewer than ranks x --batch-size (" + std::to_string(ranks) +
                      " x " + std::to_string(batch) + "): every rank's batches must be samples of its own");
  Fnv1a h;
  for (size_t i = 0; i < files_.size(); ++i)
    h.text(fs::path(files_[i]).filename().string()).number(static_cast<uint64_t>(samples[i])).number(fs::file_size(files_[i], ec));
  fingerprint_ = h.hex();
  position_ = static_cast<int64_t>(rank) * batch % total;
  skip_ = (ranks - 1) * batch;
  const auto n = static_cast<size_t>(shape_.batch);
  batch_.ints["input_ids"].resize(n * static_cast<size_t>(shape_.seq_len));
  batch_.ints["segment_ids"].resize(n * static_cast<size_t>(shape_.seq_len));
  batch_.ints["input_mask"].resize(n * static_cast<size_t>(shape_.seq_len));
  batch_.ints["masked_lm_positions"].resize(n * static_cast<size_t>(shape_.max_predictions));
  batch_.ints["masked_lm_ids"].resize(n * static_cast<size_t>(shape_.max_predictions));
  batch_.ints["next_sentence_labels"].resize(n);
}

int64_t BertShards::load_file(size_t index, bool read) {
  const std::string& f = files_[index];
  auto file = open_shard(f);
  if (H5Lexists(file, "next_sentence_labels", H5P_DEFAULT) <= 0)
    throw_usage_error("--data " + f + ": dataset 'next_sentence_labels' is missing (NVIDIA BERT shard layout expected)");
  int64_t samples = 0;
  {
    const hid_t id = H5Dopen2(file, "next_sentence_labels", H5P_DEFAULT);
    if (id < 0) throw_usage_error("--data " + f + ": dataset 'next_sentence_labels' is not a dataset (NVIDIA BERT shard layout expected)");
    auto d = h5::Handle(id, H5Dclose);
    auto s = DLPERF_H5(H5Dget_space(d), H5Sclose);
    hsize_t dims[2] = {0, 0};
    if (H5Sget_simple_extent_ndims(s) >= 1 && H5Sget_simple_extent_ndims(s) <= 2) H5Sget_simple_extent_dims(s, dims, nullptr);
    samples = static_cast<int64_t>(dims[0]);
  }
  if (samples <= 0) throw_usage_error("--data " + f + ": no samples");
  const int64_t S = shape_.seq_len, P = shape_.max_predictions;
  // Held in memory whole, as int32 (and one dataset at a time as int64 while it is read): a
  // shard whose header claims more rows than fit would otherwise end in the kernel's OOM killer.
  const double bytes = static_cast<double>(samples) * static_cast<double>(3 * S + 2 * P + 1) * 4.0 + static_cast<double>(samples) * S * 8.0;
  if (const double limit = physical_memory_bytes() / 2; limit > 0 && bytes > limit)
    throw_usage_error("--data " + f + ": " + std::to_string(samples) + " samples need " + std::to_string(static_cast<int64_t>(bytes / (1 << 20))) +
                      " MiB in memory, more than half of the " + std::to_string(static_cast<int64_t>(2 * limit / (1 << 20))) +
                      " MiB this process may use: split the shard");
  auto ids = read_dataset(file, f, "input_ids", samples, S, shape_.vocab, read);
  auto mask = read_dataset(file, f, "input_mask", samples, S, 2, read);
  auto segments = read_dataset(file, f, "segment_ids", samples, S, 2, read);
  auto positions = read_dataset(file, f, "masked_lm_positions", samples, P, S, read);
  auto lm_ids = read_dataset(file, f, "masked_lm_ids", samples, P, shape_.vocab, read);
  auto nsp = read_dataset(file, f, "next_sentence_labels", samples, 0, 2, read);
  if (!read) return samples;
  // Every sequence holds at least its [CLS] token: a sample whose mask starts with 0 is the fill
  // value of a dataset whose rows were never written (a shard claiming 20 million samples in
  // 3 kB trained on zeros, the masked-LM loss empty).
  for (int64_t i = 0; i < samples; ++i)
    if (mask[static_cast<size_t>(i * S)] != 1)
      throw_usage_error("--data " + f + ": sample " + std::to_string(i) + " holds no token (its input_mask starts with 0): rows never written?");
  ids_ = std::move(ids), mask_ = std::move(mask), segments_ = std::move(segments);
  positions_ = std::move(positions), lm_ids_ = std::move(lm_ids), nsp_ = std::move(nsp);
  file_ = index;
  return samples;
}

const HostBatch& BertShards::next() {
  const int64_t S = shape_.seq_len, P = shape_.max_predictions, total = first_.back();
  for (int64_t n = 0; n < shape_.batch; ++n) {
    // The file holding the next sample: upper_bound finds the first file starting after it.
    const auto file = static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), position_) - first_.begin() - 1);
    if (file != file_) {
      // Mid-run, on this rank alone: a fault that ends the job (a usage error would stop this
      // rank only and leave the others waiting).
      try {
        load_file(file);
      } catch (const Error& e) {
        throw Error(ErrorKind::fault, e.what());
      }
    }
    const int64_t at = position_ - first_[file];
    const auto copy = [&](const std::vector<int32_t>& src, const char* key, int64_t width) {
      std::copy_n(src.begin() + at * width, width, batch_.ints[key].begin() + n * width);
    };
    copy(ids_, "input_ids", S);
    copy(segments_, "segment_ids", S);
    copy(mask_, "input_mask", S);
    copy(positions_, "masked_lm_positions", P);
    copy(lm_ids_, "masked_lm_ids", P);
    copy(nsp_, "next_sentence_labels", 1);
    position_ = (position_ + 1) % total;
  }
  position_ = (position_ + skip_) % total;  // the other ranks' batches
  return batch_;
}

}  // namespace dlperf

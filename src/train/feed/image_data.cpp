#include "train/feed/image_data.h"

#include <iostream>
#include <mutex>

#include "backend/backend.h"
#include "core/check.h"
#include "core/error.h"
#include "data/cpu_sink.h"
#if defined(DLPERF_WITH_NVJPEG)
#include "data/nvjpeg_sink.h"
#endif

namespace dlperf {

const char* to_string(ImageDecoder d) { return d == ImageDecoder::cpu ? "cpu" : "gpu"; }

void print_warning(const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << "dlperf-train: warning: " << line << '\n' << std::flush;
}

std::shared_ptr<const data::Dataset> share_dataset(MPI_Comm comm, const std::string& path, int64_t classes) {
  int rank = 0;
  DLPERF_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  // Rank 0's result travels as (status, bytes): status 0 an index, 1 a usage error message.
  std::vector<uint8_t> bytes;
  uint8_t status = 0;
  if (rank == 0) {
    try {
      const data::Dataset d = data::Dataset::open(path, print_warning);
      if (d.num_classes() > classes)
        throw_usage_error("--data " + path + " has " + std::to_string(d.num_classes()) + " classes, more than --num-classes " +
                          std::to_string(classes) + ": raise --num-classes");
      bytes = d.serialize();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::usage) throw;
      status = 1;
      const std::string m = e.what();
      bytes.assign(m.begin(), m.end());
    }
  }
  uint64_t size = bytes.size();
  DLPERF_CHECK_MPI(MPI_Bcast(&status, 1, MPI_UINT8_T, 0, comm));
  DLPERF_CHECK_MPI(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, comm));
  bytes.resize(size);
  for (uint64_t at = 0; at < size;) {  // MPI counts are int: large indexes go in pieces
    const int n = static_cast<int>(std::min<uint64_t>(size - at, 1u << 30));
    DLPERF_CHECK_MPI(MPI_Bcast(bytes.data() + at, n, MPI_UINT8_T, 0, comm));
    at += static_cast<uint64_t>(n);
  }
  if (status == 1) throw_usage_error(std::string(bytes.begin(), bytes.end()));
  return std::make_shared<const data::Dataset>(data::Dataset::deserialize(bytes));
}

namespace {

data::ImageBatchFormat batch_format(const InputSpec& in) {
  DLPERF_ASSERT(in.dims.size() == 4 && in.dims[1] == 3, "image input (N, 3, H, W), got " + to_string(in.dims));
  data::ImageBatchFormat f;
  f.batch = in.dims[0];
  f.height = in.dims[2];
  f.width = in.dims[3];
  f.layout = in.layout == Layout::channels_last ? data::PixelLayout::nhwc : data::PixelLayout::nchw;
  switch (in.dtype) {
    case DType::f32: f.type = data::PixelType::f32; break;
    case DType::bf16: f.type = data::PixelType::bf16; break;
    case DType::f16: f.type = data::PixelType::f16; break;
    case DType::s32: DLPERF_ASSERT(false, "images are floating point");
  }
  return f;
}

}  // namespace

RealImages::RealImages(std::shared_ptr<const data::Dataset> dataset, const InputSpec& input, const ImageDataConfig& c, Backend& be)
    : dataset_(std::move(dataset)), input_(input) {
  data::LoaderConfig lc;
  lc.threads = c.threads;
  lc.prefetch = c.prefetch;
  lc.outstanding = kOutstanding;
  lc.seed = c.seed;
  lc.rank = c.rank;
  lc.world = c.world;
  lc.max_bad_samples = c.max_bad_samples;
  lc.cores = c.cores;
  lc.warn = [rank = c.rank](const std::string& m) { print_warning("rank " + std::to_string(rank) + ": " + m); };
  const data::ImageBatchFormat format = batch_format(input);
  const HostAllocator allocate = [&be](size_t bytes) { return be.host_memory(bytes); };
  std::unique_ptr<data::SampleSink> sink;
  if (c.decoder == ImageDecoder::gpu) {
#if defined(DLPERF_WITH_NVJPEG)
    DLPERF_ASSERT(be.kind() == BackendKind::cuda, "--decoder gpu runs on the cuda backend");
    sink = data::make_nvjpeg_sink(format, data::ImageLoader::slots(lc), data::Augmentation{}, c.device, allocate);
#else
    throw_usage_error("--decoder gpu needs nvJPEG, and this dlperf-train was built without it (see cmake's summary); use --decoder cpu");
#endif
  } else {
    sink = std::make_unique<data::CpuSink>(format, data::ImageLoader::slots(lc), data::Augmentation{}, allocate);
  }
  loader_ = std::make_unique<data::ImageLoader>(*dataset_, std::move(sink), lc);
  for (auto& b : batches_) {
    b.ints["labels"].resize(static_cast<size_t>(format.batch));
    b.raw["images"] = RawInput{nullptr, format.batch_bytes(), input_};
  }
  last_samples_.resize(static_cast<size_t>(format.batch));
}

const HostBatch& RealImages::next() {
  const data::LoadedBatch& b = loader_->next();
  HostBatch& out = batches_[handed_++ % kOutstanding];
  out.raw["images"].data = b.images;
  std::copy(b.labels.begin(), b.labels.end(), out.ints["labels"].begin());
  std::copy(b.samples.begin(), b.samples.end(), last_samples_.begin());
  return out;
}

DataStats RealImages::stats() const {
  const data::LoaderStats s = loader_->stats();
  return {s.images, s.bytes_read, s.bad_samples, s.queue_depth, s.busy_seconds, s.running_seconds};
}

}  // namespace dlperf

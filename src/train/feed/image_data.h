// Real images for ResNet-50 and VGG16: the image loader of src/data behind the trainer's
// DataSource. The loader writes every batch straight into the model's input format
// (Model::raw_input: NCHW f32, or NHWC bf16/f16), in host memory from the backend
// (page-locked on CUDA) or, with the nvJPEG decoder, in device memory; next() hands that
// memory to the model as HostBatch::raw, so loading a batch is one copy.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "train/feed/data_source.h"

namespace dlperf {

class Backend;

struct ImageDataConfig {
  ImageDecoder decoder = ImageDecoder::cpu;
  int threads = 1;            // loader threads of this rank
  int prefetch = 3;           // batches decoded ahead of the step
  uint64_t seed = 42;
  int rank = 0, world = 1;
  int64_t max_bad_samples = 0;
  std::vector<int> cores;     // CPU ids for the loader threads; empty: not pinned
  int device = 0;             // CUDA device of the GPU decoder
};

// Indexes the dataset on rank 0 and broadcasts the index, so a parallel file system sees one
// directory walk, not one per rank. A usage error (missing or empty dataset, more classes
// than the model's `classes` outputs) is raised on every rank alike. Warnings found while
// indexing are printed by rank 0.
std::shared_ptr<const data::Dataset> share_dataset(MPI_Comm comm, const std::string& path, int64_t classes);

// One line per warning on stderr, whole lines even from several threads.
void print_warning(const std::string& line);

class RealImages final : public DataSource {
 public:
  RealImages(std::shared_ptr<const data::Dataset> dataset, const InputSpec& input, const ImageDataConfig& config, Backend& backend);
  const HostBatch& next() override;
  void release() override { loader_->release(); }
  int outstanding() const override { return kOutstanding; }
  DataStats stats() const override;
  bool raw_batches() const override { return true; }
  std::string fingerprint() const override { return dataset_->fingerprint(); }
  const data::ImageBatchFormat& format() const { return loader_->format(); }
  // The dataset indices of the most recent batch (tests check the ranks read disjoint samples).
  const std::vector<uint32_t>& last_samples() const { return last_samples_; }

 private:
  static constexpr int kOutstanding = 2;
  std::shared_ptr<const data::Dataset> dataset_;
  InputSpec input_;
  std::unique_ptr<data::ImageLoader> loader_;
  HostBatch batches_[kOutstanding];  // one per batch the step may hold
  int64_t handed_ = 0;
  std::vector<uint32_t> last_samples_;
};

}  // namespace dlperf

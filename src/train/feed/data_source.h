// Where the trainer's batches come from: the one seam between data and the step.
//   next()     the next batch, waiting for it when it is not ready yet. It stays valid (its
//              memory untouched) until release() gives it back.
//   release()  the step no longer reads the oldest batch next() returned (its copy into the
//              model's input tensors has completed), so the source may refill its buffers.
//              Batches are released in the order next() returned them; a source may have up
//              to outstanding() batches handed out at once (a copy stream that uploads batch
//              k+1 while step k runs holds two).
//   stats()    what the loader did so far, for the trace (zeros for generated data).
//   fingerprint()  what the data read is, wherever it lies (16 hex digits; "" for generated
//              data): a copy staged per job under another path gives the same one, so
//              dlperf-reduce pools its runs; other contents give another.
// Generated sources (synthetic images and tokens, BERT shards) keep their batches for the
// whole run and ignore release(); the image loader (image_data.h) reuses its buffers.
#pragma once

#include <cstdint>
#include <string>

#include "models/model.h"

namespace dlperf {

// Where JPEGs are decoded: loader threads on the CPU (libjpeg-turbo), or nvJPEG on the GPU.
enum class ImageDecoder : uint8_t { cpu, gpu };
const char* to_string(ImageDecoder d);

struct DataStats {
  int64_t images = 0;       // samples decoded (or staged for a GPU decoder) since the start
  int64_t bytes_read = 0;   // compressed bytes read from storage since the start
  int64_t bad_samples = 0;  // distinct samples skipped as unreadable or corrupt
  int64_t queue_depth = 0;  // batches ready when the step last asked for one
  double busy_seconds = 0;  // loader threads' time reading and decoding, summed
  double running_seconds = 0;  // since the loader threads started
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual const HostBatch& next() = 0;
  virtual void release() {}
  virtual int outstanding() const { return 1 << 30; }  // generated data: any number
  virtual DataStats stats() const { return {}; }
  virtual std::string fingerprint() const { return {}; }
  // The batches carry HostBatch::raw bytes already in the model's input format (the image
  // loader): they go straight into the model's tensors, never through an input pipe's
  // canonical staging tensors (train/feed/input_stage.h).
  virtual bool raw_batches() const { return false; }
};

}  // namespace dlperf

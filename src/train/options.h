// dlperf-train's settings: parsed from the command line into one struct, validated once.
// Every invalid value is a usage error naming the flag and what it accepts.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "train/feed/data_source.h"
#include "train/optim/optimizer.h"

namespace dlperf {

struct TrainOptions {
  std::string model = "resnet50";
  BackendKind backend = BackendKind::cpu;
  Precision precision = Precision::fp32;
  int64_t batch_size = 32;      // per device
  int64_t image_size = 224;
  int64_t num_classes = 1000;
  int64_t iterations = 120;
  int64_t warmup = 20;
  uint64_t seed = 42;
  int threads = 0;              // 0 when given: automatic; parse_train_options resolves it (OMP_NUM_THREADS, else this rank's CPUs)
  bool threads_automatic = false;  // resolved per rank: ranks may differ (nodes of different sizes), so their agreement leaves it out
  bool threads_from_omp = false;   // automatic, from OMP_NUM_THREADS; else from the binding (under --pin-threads: the rank's share of cores)
  bool conv_autotune = false;   // CUDA: time the top cuDNN engine configurations per convolution shape at plan time
  bool deterministic = false;   // CUDA: backward convolutions only on deterministic cuDNN engines (--deterministic)
  float lr = 0.256f;            // for a global batch of 256, scaled linearly
  LrScheduleKind lr_schedule = LrScheduleKind::cosine;
  int64_t lr_warmup = -1;       // iterations; -1: 10% of --iterations
  float momentum = 0.875f;
  float weight_decay = 3.0517578125e-5f;
  float label_smoothing = 0.1f;
  int64_t print_every = 10;
  std::array<int, 4> resnet_blocks = {3, 4, 6, 3};
  int64_t resnet_width = 64;
  // BERT (--model bert_base)
  int64_t seq_len = 128;
  int64_t max_predictions = 20;
  std::string optimizer;        // sgd, adamw, lamb; "" before parsing picks the model's default
  float clip_grad_norm = 0.0f;  // global gradient-norm clip; 0: off
  std::string data;             // BERT: pretraining shards; CNNs: image folder tree or tar shards; "": synthetic data
  float dropout = 0.1f;          // BERT's hidden/attention dropout; VGG's classifier dropout (default 0.5)
  int64_t bert_layers = 12, bert_hidden = 768, bert_heads = 12, bert_intermediate = 3072, bert_vocab = 30522;
  // Llama (--model llama3_8b, llama3_2_1b): reduced sizes; -1 keeps the preset's value
  double peak_tflops = 0;  // MFU's peak per device; 0: the GPU table or the CPU estimate (train/measure/peak_flops.h)
  int64_t llama_layers = -1, llama_hidden = -1, llama_heads = -1, llama_kv_heads = -1, llama_ffn = -1, llama_vocab = -1;
  // Tokens per chunk of the output head and loss (LlamaConfig::logits_chunk): a number, 0 for
  // the whole batch, or auto (auto_logits_chunk: chunks only logits too large to hold whole).
  std::string logits_chunk = "auto";
  // The attention on cuda (--attention): auto (cuDNN's fused SDPA where it plans, else cuBLAS
  // products), fused (cuDNN's or a one-line error), unfused (cuBLAS products: the A/B baseline).
  std::string attention = "auto";
  // VGG16 (--model vgg16); --dropout is the classifier's (0.5 unless given)
  int64_t vgg_width = 64, vgg_hidden = 4096;
  // Real images (--data with resnet50 / vgg16)
  int loader_threads = 0;           // 0: the rank's cores not used for compute (at least 1)
  int prefetch = 3;                 // batches decoded ahead of the step
  ImageDecoder decoder = ImageDecoder::cpu;
  double max_bad_fraction = 0.001;  // of the rank's share of an epoch ...
  int64_t max_bad_count = -1;       // ... or this many (>= 0), per rank
  bool loader_only = false;         // measure the loader alone, no model
  // distributed run and traces
  std::string output;           // results file (HDF5); "" writes none
  double bucket_mb = 25.0;      // gradient bucket size
  int timeout_s = 60;           // bound on every wait for another rank
  int64_t repeat_index = 0;     // which repeat of this configuration (job scripts count)
  std::string variant;          // free-form configuration tag stored with the run
  bool pin_threads = false;     // pin each rank's threads to a disjoint core range
  int64_t flush_every = 50;     // iterations between trace flushes (a killed job keeps them)
  bool plan_only = false;       // plan the model, list the kernels each op will run, exit
  double lock_timeout_s = 300;  // longest wait for the results file's lock before giving up
  double max_loss_growth = 10;  // the run fails as diverged when the loss exceeds this x its first value; 0: only NaN/Inf
  // the step on the device (issue 13)
  CommBackend comm = CommBackend::mpi;  // gradients: nccl (cuda default) or mpi (cpu; cuda: staged through pinned host memory)
  bool cuda_graph = false;      // capture the step at the end of warm-up, replay it
  bool data_on_device = false;  // keep one synthetic batch resident on the device
  int64_t profile_ops = 0;      // time every op over this many measured iterations
  bool find_max_batch = false;  // search the largest batch per device that trains, report it, exit
  int64_t grad_accum = 1;
  std::string recompute = "none";  // none | block: recompute each block's forward during backward (issue 25)
  int zero = 0;
  std::string zero_gather = "forward";  // forward | step: where ZeRO waits for the new weights' all-gathers
  int plan_ranks = 0;           // --plan-only: plan memory for this many ranks (0: the job's)                 // 0: replicated data parallel; 1: sharded optimizer state (ZeRO-1)       // micro-batches of batch_size per optimizer step
  int64_t memory_limit_mb = 0;  // cpu: MiB of tensors and buffers the backend may hold, as a GPU's memory (0: none)
  std::string command_line;
  // Every option by flag name with its effective value ("batch-size", "32"), options that do
  // not apply to the model left out: what ranks compare at start-up and the trace records.
  std::vector<std::pair<std::string, std::string>> settings;
};

enum class ParseOutcome { run, exit_ok };  // exit_ok: --help or --version was printed

// Throws Error(ErrorKind::usage) with a one-line message on any invalid input.
ParseOutcome parse_train_options(int argc, const char* const* argv, TrainOptions& out, std::ostream& info);

}  // namespace dlperf

// The memory plan of a run (issue 25): bytes per rank for what training keeps, computed from the
// options alone, before anything is allocated, for any number of ranks (--plan-ranks). A run
// whose plan exceeds the memory there is (--memory-limit-mb, else the node's physical memory on
// the cpu backend) is refused up front with one line naming what is needed and what would help.
//
// Per rank, with P the model's parameters (analytic counts, as torchvision/Hugging Face count
// them; the flat buffers add 64-byte alignment padding, < 16 floats per tensor), n ranks:
//   weights        4P (fp32: the f32 values are also what forward reads), or 2P bf16/fp16 copies
//   master         0 in fp32; 4P f32 master values in bf16/fp16; with sharded master weights
//                  (shards_master_weights) 4P/n plus 4K, K the parameters other than matrices
//                  and filters (kept whole: forward reads them in f32; a rank keeps those outside
//                  its own block too, so the rank whose block holds none of them keeps 4K), plus (1 - 1/n)
//                  of the buckets the all-gather holds whole at once: min(4P, 2 (B + T) + T);
//                  cuda adds 2 chunks of 2 MiB per parameter tensor (a chunk holding a kept
//                  value stays mapped: an estimate), at most 4P in all
//   gradients      4P (one flat f32 buffer the layers write); --zero 2 frees each bucket once
//                  reduce-scattered, so at most (buckets in flight + 1) buckets and the layer being
//                  written are held: min(4P, 3 (B + T) + 2T), B = --bucket-mb, T = the largest
//                  parameter tensor's bytes (a bound: the real peak is measured, trace and tests)
//   optimizer      sgd 4P (momentum), adamw 8P (m, v), lamb 12P (m, v, update); /n with --zero 1
//                  or 2, plus the shard's reduced gradients 4P/n
//   accumulation   4P with --grad-accum > 1 (the sum of the earlier micro-batches); 4P/n under
//                  --zero 2 (it reduces each micro-batch and sums the reduced shards)
//   activations    from the options alone: a lower bound (size_limits.h: the first layers'
//                  outputs); with --recompute block, transformers count each layer's output and
//                  one layer's full set (ResNet's bound, the stem, is unchanged)
//   model          once the model is built on a backend that counts its allocations (cpu; cuda
//                  counts its own device allocations: within 0.01 % of their peak on an H100):
//                  what the build allocated, in place of the activation bound (and, in
//                  bf16/fp16, of the weights row): weight copies and layouts, every activation,
//                  backward's gradient scratch (the models allocate it with themselves), batch
//                  statistics, masks and workspaces. The plan then equals the allocation
//                  counter's peak to within a few hundred bytes (tests/train/memory_plan_test.cpp,
//                  every model, fp32 and bf16); oneDNN's scratchpads are outside both.
//   input staging  cuda, batches copied per step (not --data-on-device, not the image loader's):
//                  the copy engine's device copy of the model's inputs (Backend::input_pipe_bytes,
//                  canonical f32 images or s32 tokens), made as the step starts
//   buckets        the allreduce and the reduce-scatter work in place / into the shard buffer
//                  above; bf16/fp16 under --zero 1/2 all-gathers the parameters in the compute
//                  precision through two staging buffers of a bucket's words (weights 2 bytes,
//                  the rest 4; a bucket that would not pack to 3/4 of its bytes goes in place):
//                  2 min(4W, 3/4 (B + T), max(1.5 B, B + T/2)), W = M/2 + (P - M) the whole
//                  model's words, M its matrices and filters (one buffer where a bucket holds
//                  the model)
//   whole master   with sharded master weights the whole f32 master (4P) is held twice: at
//                  set-up, while the initial values are broadcast and the compute copies made
//                  (the exchange then gives the unkept values back before its staging buffers,
//                  the accumulation and the optimizer state are made), and at the end, when every
//                  bucket is all-gathered in f32 for the replicas' checksum (the optimizer state
//                  and stage 1's gradients given back first). Both hold it beside the weights (or
//                  the built model) and the shard's reduced gradients (4P/n); the end also beside
//                  the accumulation, input staging and buckets. The total is the larger of that
//                  moment and training's; the row is printed where it is the larger.
#pragma once

#include <cstdint>
#include <string>

#include "train/options.h"

namespace dlperf {

struct MemoryPlan {
  int ranks = 1;
  int64_t parameters = 0;
  double weights = 0, master = 0, gradients = 0, optimizer = 0, accumulation = 0, activations_min = 0;
  // The model as built (with_built_model), 0 before: what the backend allocated building it.
  // It replaces the activation floor and, in bf16/fp16, the weights row (the compute copies are
  // among the model's allocations); in fp32 the weights row is the flat f32 values buffer.
  double model = 0;
  bool copies_in_model = false;
  double input = 0;  // the input pipe's device staging set (cuda), 0 where there is none
  double buckets = 0;  // the compute-precision all-gather's staging (bf16/fp16 under --zero 1/2)
  // Sharded master weights: the whole f32 master and the shard's reduced gradients, held at
  // set-up and at the end (above); 0 otherwise.
  double whole_master = 0, shard_gradients = 0;
  double base() const { return model > 0 ? (copies_in_model ? 0.0 : weights) + model : weights + activations_min; }
  double training() const { return base() + master + gradients + optimizer + accumulation + input + buckets; }
  double whole_master_total() const {
    return whole_master > 0 ? base() + whole_master + shard_gradients + accumulation + input + buckets : 0.0;
  }
  double total() const { return training() > whole_master_total() ? training() : whole_master_total(); }
};

// The model's trainable parameters from its options (no allocation).
int64_t planned_parameter_count(const TrainOptions& o);
// Those of them with ParamRole::weight (convolution filters, linear matrices): what sharded
// master weights shard; the rest (biases, norms, embeddings) stay whole on every rank.
int64_t planned_matrix_count(const TrainOptions& o);
// The parameter tensors (each a range of the flat buffers), as the models declare them.
int64_t planned_tensor_count(const TrainOptions& o);
// ZeRO shards the f32 master weights as well (train/parallel/zero.h): bf16/fp16 runs under
// --zero 1/2 on more than one rank, on a backend whose buffers give decommitted memory back
// (cpu; cuda where the GPU supports virtual memory management, which the plan assumes: a GPU
// without it keeps the whole master, and its run's plan undercounts).
bool shards_master_weights(const TrainOptions& o, int ranks);
MemoryPlan plan_memory(const TrainOptions& o, int ranks);
// The plan once the model is built on a backend that counts its allocations (cpu): the model row
// is what the build allocated (TrainingStack::model_bytes), every tensor, weight copy or
// layout, activation gradient and workspace the step will use, in place of the activation floor.
// The parameter-side rows stay the formulas above (their buffers are allocated exactly so).
MemoryPlan with_built_model(MemoryPlan p, const TrainOptions& o, double model_bytes);
// The plan as lines "memory plan per rank (...): ...", against `limit_bytes` (0: unknown).
std::string format_memory_plan(const MemoryPlan& p, double limit_bytes);
// The memory a rank may use: --memory-limit-mb, else on cpu its share of the node's memory (the
// node's over ranks_on_node), else (cuda) the GPU's, gpu_bytes (0: unknown, a machine without
// the GPU).
double memory_limit_bytes(const TrainOptions& o, double gpu_bytes = 0, int ranks_on_node = 1);
// Throws Error(usage) with one line when the plan exceeds limit_bytes (> 0).
void refuse_unless_fits(const TrainOptions& o, const MemoryPlan& p, double limit_bytes);

}  // namespace dlperf

#include "train/memory/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "models/bert.h"
#include "models/llama_config.h"
#include "train/llama_options.h"
#include "models/vgg.h"
#include "train/parallel/sharding.h"
#include "train/memory/size_limits.h"

namespace dlperf {
namespace {

// ResNet v1.5 (torchvision's resnet50 at width 64, blocks 3,4,6,3): stem conv 7x7 and its batch
// norm; per bottleneck conv 1x1, 3x3, 1x1 with batch norms, a projection (conv 1x1 + norm) on
// each stage's first block; the classifier.
// filters_only: the convolution filters and the classifier's matrix, without norms and bias.
int64_t resnet_parameters(const TrainOptions& o, bool filters_only = false) {
  const int64_t w = o.resnet_width, norm = filters_only ? 0 : 2;
  int64_t n = 3 * 49 * w + norm * w, in = w;
  for (int s = 0; s < 4; ++s) {
    const int64_t p = w << s;
    for (int b = 0; b < o.resnet_blocks[static_cast<size_t>(s)]; ++b) {
      n += in * p + norm * p + 9 * p * p + norm * p + p * 4 * p + norm * 4 * p;
      if (b == 0) n += in * 4 * p + norm * 4 * p;
      in = 4 * p;
    }
  }
  return n + in * o.num_classes + (filters_only ? 0 : o.num_classes);
}

// The largest parameter tensor (elements): what one bucket can exceed --bucket-mb by.
int64_t largest_parameter_tensor(const TrainOptions& o) {
  if (o.model == "resnet50") {
    const int64_t w = o.resnet_width;
    return std::max(9 * 64 * w * w, 32 * w * o.num_classes);  // the last stage's 3x3 conv, the classifier
  }
  if (o.model == "vgg16") {
    const int64_t w = o.vgg_width, side = o.image_size / 32;
    return std::max({9 * 64 * w * w, 8 * w * side * side * o.vgg_hidden, o.vgg_hidden * o.vgg_hidden, o.vgg_hidden * o.num_classes});
  }
  if (is_llama_model(o.model)) {
    const LlamaConfig c = llama_config(o);
    return std::max({c.vocab * c.hidden, c.hidden * c.ffn, c.hidden * c.hidden});
  }
  return std::max({o.bert_vocab * o.bert_hidden, o.bert_hidden * o.bert_intermediate, 3 * o.bert_hidden * o.bert_hidden});
}

// CUDA maps the sharded master in chunks of the device's allocation granularity (2 MiB on the
// GPUs dlperf targets): a chunk that holds a kept value stays mapped whole.
constexpr double kCudaChunkBytes = 2.0 * 1024 * 1024;

// GiB, or MiB below one GiB (a reduced model's plan would read 0.00 GiB throughout).
VggConfig vgg_config(const TrainOptions& o) {
  VggConfig vc;
  vc.width = o.vgg_width;
  vc.hidden = o.vgg_hidden;
  vc.classes = o.num_classes;
  vc.image_size = o.image_size;
  return vc;
}

std::string gib(double bytes) {
  char buf[32];
  if (bytes < 1024.0 * 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024.0));
  else std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

int64_t planned_parameter_count(const TrainOptions& o) {
  if (o.model == "resnet50") return resnet_parameters(o);
  if (o.model == "vgg16") return vgg_parameter_count(vgg_config(o));
  if (is_llama_model(o.model)) return llama_parameter_count(llama_config(o));
  BertConfig c;
  c.layers = o.bert_layers;
  c.hidden = o.bert_hidden;
  c.heads = o.bert_heads;
  c.intermediate = o.bert_intermediate;
  c.vocab = o.bert_vocab;
  return bert_parameter_count(c);
}

int64_t planned_tensor_count(const TrainOptions& o) {
  if (o.model == "resnet50") {  // stem conv + norm (weight, bias); per bottleneck 3 convs + 3 norms; projections; fc
    int64_t n = 3 + 2;
    for (int s = 0; s < 4; ++s) n += 9 * o.resnet_blocks[static_cast<size_t>(s)] + 3;
    return n;
  }
  if (o.model == "vgg16") return 2 * (13 + 3);  // 13 convolutions and 3 linears, weight and bias each
  if (is_llama_model(o.model)) {
    const LlamaConfig c = llama_config(o);
    return c.layers * 9 + 2 + (c.tied ? 0 : 1);  // 7 matrices and 2 norms per layer; embedding, norm, head
  }
  return 5 + o.bert_layers * 16 + 9;  // embeddings and their norm; per layer 6 linears and 2 norms; heads
}

int64_t planned_matrix_count(const TrainOptions& o) {
  if (o.model == "resnet50") return resnet_parameters(o, true);
  if (o.model == "vgg16") return vgg_matrix_count(vgg_config(o));
  if (is_llama_model(o.model)) {
    const LlamaConfig c = llama_config(o);
    const int64_t H = c.hidden, D = c.hidden / c.heads, q = c.heads * D, kv = c.kv_heads * D;
    return c.layers * (H * q + 2 * H * kv + q * H + 3 * H * c.ffn) + (c.tied ? 0 : c.vocab * H);  // the output head when untied
  }
  const int64_t H = o.bert_hidden, I = o.bert_intermediate;
  return o.bert_layers * (4 * H * H + 2 * H * I) + 2 * H * H /* pooler, transform */ + 2 * H /* next-sentence classifier */;
}

bool shards_master_weights(const TrainOptions& o, int ranks) {
  const bool low = o.precision == Precision::bf16 || o.precision == Precision::fp16;
  return low && o.zero > 0 && ranks > 1;
}

MemoryPlan plan_memory(const TrainOptions& o, int ranks) {
  MemoryPlan p;
  p.ranks = ranks;
  p.parameters = planned_parameter_count(o);
  const double P = static_cast<double>(p.parameters), f32 = 4.0 * P;
  const bool low = o.precision == Precision::bf16 || o.precision == Precision::fp16;
  // A bucket closes once it reaches --bucket-mb, so it exceeds it by less than one tensor.
  const double tensor = 4.0 * static_cast<double>(largest_parameter_tensor(o));
  const double bucket = o.bucket_mb * 1024.0 * 1024.0 + tensor;
  p.weights = low ? 2.0 * P : f32;
  p.master = low ? f32 : 0.0;
  // Sharded master: the all-gather holds up to two buckets whole at a time, and a layer spanning
  // them (under --zero 1 the pool their pages take turns in: as many as are live at once).
  double gathering = 0;
  if (shards_master_weights(o, ranks)) {
    const double kept = 4.0 * static_cast<double>(p.parameters - planned_matrix_count(o));
    gathering = std::min(f32, 2.0 * bucket + tensor) * (1.0 - 1.0 / ranks);
    p.master = f32 / ranks + kept + gathering;
    p.whole_master = f32;
    p.shard_gradients = f32 / ranks;
    // On a GPU each kept run (a rank's block of a bucket, a kept tensor) may pin a partial chunk
    // at either end: an estimate of two per tensor; never more than the whole buffer mapped.
    if (o.backend == BackendKind::cuda) p.master = std::min(f32, p.master + 2.0 * kCudaChunkBytes * static_cast<double>(planned_tensor_count(o)));
  }
  const double state = o.optimizer == "lamb" ? 3.0 : o.optimizer == "adamw" ? 2.0 : 1.0;
  const bool sharded = o.zero > 0 && ranks > 1;
  p.optimizer = sharded ? (state + 1.0) * f32 / ranks : state * f32;  // sharded: + the shard's reduced gradients
  p.gradients = f32;
  p.accumulation = o.grad_accum > 1 ? f32 : 0.0;
  if (sharded && o.zero == 2) {
    // Buckets in flight, the one backward is closing, and the layer it is writing (<= 2 of the
    // largest tensor).
    p.gradients = std::min(f32, static_cast<double>(kZeroBucketsInFlight + 1) * bucket + 2.0 * tensor);
    // On a GPU each held bucket, and the layer being written, may keep a partial chunk mapped at
    // either end.
    if (o.backend == BackendKind::cuda)
      p.gradients = std::min(f32, p.gradients + 2.0 * kCudaChunkBytes * static_cast<double>(kZeroBucketsInFlight + 2));
    p.accumulation = o.grad_accum > 1 ? f32 / ranks : 0.0;  // later micro-batches' reduced shard
    // The master's all-gather comes after backward, when these buckets are freed: the peak holds
    // the larger of the two, not both.
    p.master -= std::min(gathering, p.gradients);
  }
  if (low && sharded) {  // the compute-precision all-gather's two staging buffers (train/parallel/zero.h)
    const double matrices = static_cast<double>(planned_matrix_count(o)), packed = 2.0 * matrices + 4.0 * (P - matrices);
    // A bucket packs to at most 3/4 of its bytes (or goes in place): its tensors before the last
    // (< B) plus the last, T at most, whose words are half its bytes if it is a weight; a kept
    // last tensor leaves it packed only when the weights before it outweigh it (<= 1.5 B).
    const double b = o.bucket_mb * 1024.0 * 1024.0;
    p.buckets = (bucket >= f32 ? 1.0 : 2.0) * std::min({packed, 0.75 * bucket, std::max(1.5 * b, b + tensor / 2.0)});
  }
  p.activations_min = min_activation_bytes(o);
  return p;
}

MemoryPlan with_built_model(MemoryPlan p, const TrainOptions& o, double model_bytes) {
  if (model_bytes <= 0) return p;
  p.model = model_bytes;
  p.copies_in_model = o.precision == Precision::bf16 || o.precision == Precision::fp16;
  return p;
}

std::string format_memory_plan(const MemoryPlan& p, double limit_bytes) {
  const auto row = [](const char* what, double bytes) { return std::string("  ") + what + gib(bytes) + "\n"; };
  const bool built = p.model > 0;
  std::string s = "memory plan per rank (" + std::to_string(p.ranks) + " rank" + (p.ranks > 1 ? "s" : "") + ", " +
                  std::to_string(p.parameters) + " parameters" + (built ? ", the model built" : "") + "):\n";
  if (built && p.copies_in_model) s += "  weights          (bf16/fp16 copies: in the model row)\n";
  else s += row("weights          ", p.weights);
  s += row("master weights   ", p.master);
  s += row("gradients        ", p.gradients);
  s += row("optimizer state  ", p.optimizer);
  s += row("accumulation     ", p.accumulation);
  if (built) s += row("model (built)    ", p.model) + "    (weight copies and layouts, activations, their gradients, workspaces)\n";
  else s += row("activations  >=  ", p.activations_min);
  if (p.input > 0) s += row("input staging    ", p.input);
  s += row("buckets          ", p.buckets);
  if (p.whole_master_total() > p.training())
    s += row(built ? "whole master     " : "whole master >=  ", p.whole_master_total()) +
         "    (set-up and the end hold the whole f32 master beside the weights, activations, the shard's gradients, the\n"
         "    accumulation, input and buckets: more than a training step, so the total)\n";
  s += std::string(built ? "  total            " : "  total        >=  ") + gib(p.total());
  if (limit_bytes > 0) s += " of " + gib(limit_bytes) + (p.total() <= limit_bytes ? ": fits" : ": DOES NOT FIT");
  return s + "\n";
}

double memory_limit_bytes(const TrainOptions& o, double gpu_bytes, int ranks_on_node) {
  if (o.memory_limit_mb > 0) return static_cast<double>(o.memory_limit_mb) * 1024.0 * 1024.0;
  return o.backend == BackendKind::cpu ? physical_memory_bytes() / std::max(1, ranks_on_node) : gpu_bytes;
}

void refuse_unless_fits(const TrainOptions& o, const MemoryPlan& p, double limit_bytes) {
  if (limit_bytes <= 0 || p.total() <= limit_bytes) return;
  const double activations = p.model > 0 ? p.model : p.activations_min;  // as built (cpu), or the floor
  const double params = p.total() - activations;  // the two parts add up to the total
  const bool whole = p.whole_master_total() > p.training();
  std::string help;
  if (o.zero < 2 && params > activations) help += "--zero " + std::to_string(o.zero + 1) + " over more ranks (--plan-ranks N shows the plan), ";
  if (o.grad_accum > 1 && o.zero < 2) help += "no --grad-accum (its buffer), ";
  if (activations > params && o.recompute == "none" && o.model != "vgg16") help += "--recompute block, ";
  if (is_llama_model(o.model)) {  // whole logits a large part of the activations: the head over chunks of tokens
    const LlamaConfig c = llama_config(o);
    const int64_t tokens = c.batch * c.seq_len;
    const double logit_bytes = static_cast<double>(llama_logit_bytes(o));
    if (c.logits_chunk == 0 && tokens % 4 == 0 &&
        logit_bytes * static_cast<double>(tokens) * static_cast<double>(c.vocab) > 0.25 * activations)
      help += "--logits-chunk " + std::to_string(tokens / 4) + ", ";
  }
  if (activations > params) help += "a smaller --batch-size with --grad-accum, ";
  help += "a smaller model";
  const std::string rest = p.model > 0 ? "the model as built " + gib(p.model) : "activations >= " + gib(p.activations_min);
  throw_usage_error("the run needs at least " + gib(p.total()) + " per rank (parameters, gradients, optimizer state and buffers " +
                    gib(params) + (whole ? ", the whole f32 master at set-up and at the end" : "") + ", " + rest + ") but a rank has " +
                    gib(limit_bytes) +
                    (o.memory_limit_mb > 0               ? " (--memory-limit-mb)"
                     : o.backend == BackendKind::cuda ? " (the GPU's memory)"
                                                      : " (its share of the memory this node gives the job: physical, or its cgroup's limit)") +
                    "; try " + help + " (--plan-only prints the plan)");
}

}  // namespace dlperf

#include "train/registry.h"

#include <algorithm>
#include <cmath>

#include "comm/core_pinning.h"
#include "comm/topology.h"
#include "core/error.h"
#include "models/bert.h"
#include "models/llama.h"
#include "models/resnet.h"
#include "models/vgg.h"
#include "train/optim/adam.h"
#include "train/feed/bert_data.h"
#include "train/llama_options.h"
#include "train/feed/llama_data.h"

namespace dlperf {

namespace {

BertConfig bert_config(const TrainOptions& o) {
  BertConfig c;
  c.layers = o.bert_layers;
  c.hidden = o.bert_hidden;
  c.heads = o.bert_heads;
  c.intermediate = o.bert_intermediate;
  c.vocab = o.bert_vocab;
  c.batch = o.batch_size;
  c.seq_len = o.seq_len;
  c.max_predictions = o.max_predictions;
  c.dropout = o.dropout;
  c.dropout_seed = o.seed;
  c.recompute = o.recompute == "block";
  return c;
}

}  // namespace

std::unique_ptr<Model> make_model(const TrainOptions& o, Backend& be) {
  if (o.model == "resnet50") {
    ResNetConfig rc;
    rc.blocks = o.resnet_blocks;
    rc.width = o.resnet_width;
    rc.classes = o.num_classes;
    rc.batch = o.batch_size;
    rc.image_size = o.image_size;
    rc.label_smoothing = o.label_smoothing;
    rc.recompute = o.recompute == "block";
    return make_resnet(be, rc);
  }
  if (o.model == "vgg16") {
    VggConfig vc;
    vc.width = o.vgg_width;
    vc.hidden = o.vgg_hidden;
    vc.classes = o.num_classes;
    vc.batch = o.batch_size;
    vc.image_size = o.image_size;
    vc.dropout = o.dropout;
    vc.label_smoothing = o.label_smoothing;
    vc.dropout_seed = o.seed;
    return make_vgg(be, vc);
  }
  if (o.model == "bert_base") return make_bert(be, bert_config(o));
  if (is_llama_model(o.model)) return make_llama(be, llama_config(o));
  throw_usage_error("--model '" + o.model + "' is unknown: use resnet50, vgg16, bert_base, llama3_8b or llama3_2_1b");
}

std::unique_ptr<DataSource> make_data(const TrainOptions& o, int rank, int world) {
  const uint64_t seed = o.seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(rank);
  // Generated batches: 4 steps' worth, so --batch-size b --grad-accum n cycles the same samples
  // as --batch-size b*n (the pool is drawn sample by sample from one stream).
  const int pool = static_cast<int>(4 * o.grad_accum);
  if (o.model == "bert_base") {
    const BertDataShape shape{o.batch_size, o.seq_len, o.max_predictions, o.bert_vocab};
    if (!o.data.empty()) return std::make_unique<BertShards>(o.data, shape, rank, world);
    return std::make_unique<SyntheticTokens>(shape, seed, pool);
  }
  if (is_llama_model(o.model) && !o.data.empty())
    return std::make_unique<IndexedTokens>(o.data, o.batch_size, o.seq_len, llama_config(o).vocab, o.seed, rank, world);
  if (is_llama_model(o.model)) return std::make_unique<SyntheticLlamaTokens>(o.batch_size, o.seq_len, llama_config(o).vocab, seed, pool);
  return std::make_unique<SyntheticImages>(o.batch_size, o.image_size, o.num_classes, seed, pool);
}

bool uses_image_files(const TrainOptions& o) { return !o.data.empty() && o.model != "bert_base" && !is_llama_model(o.model); }

namespace {

// The node-level core budget of the image loader: the PUs this process could run on when it
// started (before --pin-threads narrowed the main thread's binding), and the PUs the pinning
// plan gave the compute threads of every local rank of this node.
struct CoreBudget {
  std::vector<int> start;
  std::vector<int> compute;  // empty: not pinned
  bool own_sets = false;     // PinPlan::own_sets: `start` is this rank's alone
};

CoreBudget& core_budget() {
  static CoreBudget b{thread_binding(Topology::this_machine()), {}};
  return b;
}

// The start PUs the compute threads of no local rank use, split evenly among the local ranks
// (with --loader-only nothing computes: an even share of all of them).
std::vector<int> spare_cores(const TrainOptions& o, const WorldInfo& w) {
  const CoreBudget& b = core_budget();
  std::vector<int> free;
  for (int pu : b.start)
    if (o.loader_only || std::find(b.compute.begin(), b.compute.end(), pu) == b.compute.end()) free.push_back(pu);
  // Bound by the launcher to CPUs of its own, a rank's spare cores are all its own (the generated
  // CPU jobs: --threads cpus-1 leaves each rank one core for its loader); sharing one set, the
  // node's ranks split what their compute threads leave.
  if (b.own_sets) return free;
  const size_t share = free.size() / static_cast<size_t>(std::max(1, w.local_size));
  const auto first = free.begin() + static_cast<std::ptrdiff_t>(share * static_cast<size_t>(w.local_rank));
  return {first, first + static_cast<std::ptrdiff_t>(share)};
}

}  // namespace

void note_start_cores() { (void)core_budget(); }

void note_compute_pinning(const PinPlan& plan) {
  std::vector<int>& c = core_budget().compute;
  c.clear();
  for (const auto& pus : plan.pus) c.insert(c.end(), pus.begin(), pus.end());
  core_budget().own_sets = plan.own_sets;
}

int loader_threads(const TrainOptions& o, const WorldInfo& w) {
  if (o.loader_threads > 0) return o.loader_threads;
  const auto all = static_cast<int>(core_budget().start.size());
  if (o.loader_only) return std::max(1, all / std::max(1, w.local_size));  // nothing else runs
  if (o.pin_threads) return std::max<int>(1, static_cast<int>(spare_cores(o, w).size()));
  return std::max(1, all / std::max(1, w.local_size) - o.threads);
}

std::unique_ptr<RealImages> make_image_data(const TrainOptions& o, const WorldInfo& w, std::shared_ptr<const data::Dataset> dataset,
                                            const InputSpec& input, Backend& be) {
  ImageDataConfig c;
  c.decoder = o.decoder;
  c.threads = loader_threads(o, w);
  c.prefetch = o.prefetch;
  c.seed = o.seed;
  c.rank = w.rank;
  c.world = w.size;
  c.device = w.local_rank;
  // The limit is per rank: its share of one epoch is what it reads before the order repeats.
  const double share = static_cast<double>(dataset->size() / static_cast<size_t>(w.size));
  c.max_bad_samples = o.max_bad_count >= 0 ? o.max_bad_count : static_cast<int64_t>(o.max_bad_fraction * share);
  if (o.pin_threads) {
    c.cores = spare_cores(o, w);
    // No spare core: the loader shares the rank's own compute cores (the binding its threads
    // inherit) rather than another rank's.
  }
  return std::make_unique<RealImages>(std::move(dataset), input, c, be);
}

InputSpec cnn_image_input(const TrainOptions& o) {
  const DType t = compute_dtype(o.precision);
  return {{o.batch_size, 3, o.image_size, o.image_size}, t, t == DType::f32 ? Layout::canonical : Layout::channels_last};
}

std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, Backend& be, ParamStore& store, const OptimizerShard* shard) {
  std::unique_ptr<Optimizer> opt;
  // NVIDIA's BERT betas and eps; Llama 3's (beta2 0.95, eps 1e-8 as torchtitan and Meta's recipe).
  const AdamConfig adam = is_llama_model(o.model) ? AdamConfig{0.9f, 0.95f, 1e-8f, o.weight_decay}
                                                  : AdamConfig{0.9f, 0.999f, 1e-6f, o.weight_decay};
  if (o.optimizer == "adamw") opt = std::make_unique<AdamW>(be, store, adam, shard);
  else if (o.optimizer == "lamb") opt = std::make_unique<Lamb>(be, store, adam, shard);
  else opt = std::make_unique<Sgd>(be, store, SgdConfig{o.momentum, o.weight_decay}, shard);
  if (o.clip_grad_norm > 0) opt = std::make_unique<ClipGradNorm>(be, store, std::move(opt), o.clip_grad_norm);
  return opt;
}

// SGD scales the batch-256 rate linearly with the global batch (Goyal et al.); the Adam family
// by the square root (the LAMB paper's rule). BERT's default warm-up is NVIDIA's phase-1
// proportion, 28.43% of the iterations; ResNet's 10%.
LrSchedule make_lr_schedule(const TrainOptions& o, int world_size) {
  const int64_t warmup = o.lr_warmup >= 0              ? o.lr_warmup
                         : o.model == "bert_base" ? static_cast<int64_t>(0.2843 * static_cast<double>(o.iterations))
                                                  : o.iterations / 10;
  const float ratio = static_cast<float>(o.batch_size * o.grad_accum * world_size) / 256.0f;  // the global batch
  const float lr = is_llama_model(o.model) ? o.lr  // Llama: the recipe's rate as given
                   : o.optimizer == "sgd"    ? o.lr * ratio
                                             : o.lr * std::sqrt(ratio);
  return {o.lr_schedule, lr, warmup, o.iterations};
}

std::string model_title(const TrainOptions& o) {
  if (o.model == "resnet50") {
    const bool full = o.resnet_blocks == std::array<int, 4>{3, 4, 6, 3} && o.resnet_width == 64;
    return full ? "ResNet-50 v1.5" : "reduced ResNet v1.5";
  }
  if (o.model == "vgg16") {
    const bool full = o.vgg_width == 64 && o.vgg_hidden == 4096;
    return full ? "VGG16" : "reduced VGG16";
  }
  if (o.model == "bert_base") {
    const bool full = o.bert_layers == 12 && o.bert_hidden == 768 && o.bert_heads == 12 && o.bert_intermediate == 3072 &&
                      o.bert_vocab == 30522;
    return std::string(full ? "BERT-base" : "reduced BERT") + " pretraining, seq " + std::to_string(o.seq_len) + ", " +
           std::to_string(o.max_predictions) + " predictions, " + o.optimizer + (o.data.empty() ? ", synthetic tokens" : ", " + o.data);
  }
  if (is_llama_model(o.model)) {
    const LlamaConfig c = llama_config(o), full = llama_preset(o.model);
    const bool same = c.layers == full.layers && c.hidden == full.hidden && c.heads == full.heads && c.kv_heads == full.kv_heads &&
                      c.ffn == full.ffn && c.vocab == full.vocab;
    const int64_t tokens = c.batch * c.seq_len;
    const std::string head = c.logits_chunk > 0 ? ", logits in " + std::to_string(tokens / c.logits_chunk) + " chunks of " +
                                                      std::to_string(c.logits_chunk) + " tokens"
                                                : "";
    return std::string(same ? "" : "reduced ") + (o.model == "llama3_8b" ? "Llama 3.1 8B" : "Llama 3.2 1B") + " pretraining, seq " +
           std::to_string(o.seq_len) + head + (o.data.empty() ? ", synthetic tokens" : ", indexed dataset " + o.data);
  }
  return o.model;
}

}  // namespace dlperf

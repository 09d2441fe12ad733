#include "train/options.h"

#include <sched.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/file_io.h"
#include "core/given_options.h"
#include "core/parse_number.h"
#include "dlperf_version.h"
#include "models/llama_config.h"
#include "train/feed/bert_data.h"
#include "train/feed/token_sources.h"
#include "train/llama_options.h"
#include "models/resnet.h"
#include "models/vgg.h"
#include "train/memory/size_limits.h"

namespace po = boost::program_options;

namespace dlperf {
namespace {

// --threads 0: OMP_NUM_THREADS when it names a count (its first level: "8,2"), as sites set it
// in their modules; else the CPUs this rank may run on (its affinity mask, which the launcher
// set: srun -c 8 gives 8 of a 128-core node, not 128).
// Sets o.threads and o.threads_from_omp.
void automatic_threads(TrainOptions& o) {
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
    std::string first(env);
    first = first.substr(0, first.find(','));
    first.erase(0, first.find_first_not_of(" \t"));  // libgomp allows blanks around the number
    first.erase(first.find_last_not_of(" \t") + 1);
    if (const auto n = parse_uint64(first); n && *n >= 1 && *n <= static_cast<uint64_t>(kMaxThreads)) {
      o.threads = static_cast<int>(*n);
      o.threads_from_omp = true;
      return;
    }
    // libgomp only warns and runs on; the run then took every CPU, not the count a module meant.
    throw_usage_error("OMP_NUM_THREADS='" + printable(env) + "' is not a thread count from 1 to " + std::to_string(kMaxThreads) +
                      " (--threads 0 reads it): set a number such as 8 (or 8,2), unset it, or give --threads");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    o.threads = std::min(CPU_COUNT(&set), kMaxThreads);
  else
    o.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
}

// 1 TiB: more than any device holds, and its bytes far inside a size_t. At least 1 KiB: a
// smaller value cuts the buckets below one element (1e-7 MiB reached an internal check).
constexpr double kMaxBucketMb = 1024.0 * 1024.0, kMinBucketMb = 1.0 / 1024.0;

template <class T>
void require_positive(const char* flag, T v) {
  if (v <= 0) throw_usage_error(std::string("--") + flag + " must be a positive integer (got " + std::to_string(v) + ")");
}

// "3,4,6,3": exactly four positive integers, each the whole of its part ("1,1,1,1x" and five
// stages are refused, not read as 1,1,1,1).
std::array<int, 4> parse_blocks(const std::string& s) {
  const auto parts = parse_int_list(s);
  std::array<int, 4> b{};
  bool ok = parts && parts->size() == 4;
  for (size_t i = 0; ok && i < 4; ++i) {
    ok = (*parts)[i] > 0 && (*parts)[i] <= 1000;
    if (ok) b[i] = static_cast<int>((*parts)[i]);
  }
  if (!ok) throw_usage_error("--resnet-blocks takes four positive integers like 3,4,6,3 (got '" + s + "')");
  return b;
}

// --zero against the rest (issue 25).
void validate_zero(const TrainOptions& o) {
  if (o.zero < 0 || o.zero > 2)
    throw_usage_error("--zero must be 0 (replicated), 1 (sharded optimizer state) or 2 (and sharded gradients), got " + std::to_string(o.zero));
  if (o.zero_gather != "forward" && o.zero_gather != "step")
    throw_usage_error("--zero-gather '" + o.zero_gather + "' is unknown: use forward or step");
  if (o.zero == 0 && o.zero_gather != "forward")
    throw_usage_error("--zero-gather " + o.zero_gather + " applies to --zero 1 and 2 (--zero 0 all-gathers nothing); add --zero 1 or drop it");
  if (o.zero == 0) return;
  const std::string z = "--zero " + std::to_string(o.zero);
  if (o.cuda_graph) throw_usage_error("--cuda-graph and " + z + " exclude each other");
}

// The device-step options (issue 13) against each other and the rest.
void validate_step_options(TrainOptions& o, const std::string& comm) {
  const bool cuda = o.backend == BackendKind::cuda;
  if (comm.empty()) o.comm = cuda ? CommBackend::nccl : CommBackend::mpi;
  else if (comm == "mpi") o.comm = CommBackend::mpi;
  else if (comm == "nccl") o.comm = CommBackend::nccl;
  else throw_usage_error("--comm '" + comm + "' is unknown: use nccl or mpi");
  if (o.comm == CommBackend::nccl && !cuda) throw_usage_error("--comm nccl needs --backend cuda (the cpu backend's gradients use mpi)");
  if (o.attention != "auto" && o.attention != "fused" && o.attention != "unfused")
    throw_usage_error("--attention '" + o.attention + "' is unknown: use auto, fused or unfused");
  if (o.attention != "auto" && !cuda)
    throw_usage_error("--attention " + o.attention + " needs --backend cuda (the cpu backend runs its own blocked online softmax)");
  // They choose among cuDNN's engines: on the cpu backend they did nothing, said nothing, and
  // the trace recorded a setting that had not applied.
  if (o.conv_autotune && !cuda) throw_usage_error("--conv-autotune needs --backend cuda (it times cuDNN's engines)");
  if (o.deterministic && !cuda) throw_usage_error("--deterministic needs --backend cuda (it limits cuDNN's engines)");
  if (o.cuda_graph) {
    if (!cuda) throw_usage_error("--cuda-graph needs --backend cuda");
    if (o.profile_ops > 0) throw_usage_error("--cuda-graph and --profile-ops exclude each other (graphs hide the ops)");
    // The step is captured at the last warm-up iteration, and never at the first (the
    // allocator's): with fewer than 2, the capture and instantiation fall in the measured window.
    if (o.warmup < 2)
      throw_usage_error("--cuda-graph needs --warmup 2 or more (got " + std::to_string(o.warmup) +
                        "): the step is captured during warm-up, outside the measured window");
  }
  if (o.profile_ops < 0) throw_usage_error("--profile-ops must be 0 (off) or a number of iterations");
  if (o.profile_ops > o.iterations - o.warmup)
    throw_usage_error("--profile-ops " + std::to_string(o.profile_ops) + " exceeds the " + std::to_string(o.iterations - o.warmup) +
                      " measured iterations (--iterations - --warmup)");
  if (o.grad_accum <= 0 || o.grad_accum > 4096) throw_usage_error("--grad-accum must be 1 to 4096 micro-batches (got " + std::to_string(o.grad_accum) + ")");
  if (o.grad_accum > 1 && o.cuda_graph) throw_usage_error("--cuda-graph and --grad-accum exclude each other (a captured step holds one micro-batch)");
  validate_zero(o);
  if (o.recompute != "none" && o.recompute != "block") throw_usage_error("--recompute '" + o.recompute + "' is unknown: use none or block");
  if (o.recompute == "block" && o.model == "vgg16") throw_usage_error("--recompute block: vgg16 has no blocks to recompute; use resnet50, bert_base or llama");
  if (o.plan_ranks < 0) throw_usage_error("--plan-ranks must be 0 (the job's ranks) or positive");
  if (o.plan_ranks > 0 && !o.plan_only) throw_usage_error("--plan-ranks plans memory for --plan-only; add --plan-only");
  if (o.memory_limit_mb < 0) throw_usage_error("--memory-limit-mb must be 0 (none) or positive");
  // A limit above the node's memory bounds nothing (--find-max-batch doubled until the kernel's
  // OOM killer), and past 2^43 MiB its byte count overflowed.
  if (const double node = physical_memory_bytes(); o.memory_limit_mb > 0 && !o.plan_only &&
                                                    (o.memory_limit_mb > (int64_t{1} << 40) || (node > 0 && o.memory_limit_mb * 1048576.0 > node)))
    throw_usage_error("--memory-limit-mb " + std::to_string(o.memory_limit_mb) + " is above this node's memory (" +
                      std::to_string(static_cast<int64_t>(node / 1048576)) + " MiB): it would limit nothing");
  if (o.memory_limit_mb > 0 && cuda) throw_usage_error("--memory-limit-mb is for the cpu backend; a GPU's memory is its limit");
  if (o.find_max_batch && !cuda && o.memory_limit_mb == 0)
    throw_usage_error("--find-max-batch on the cpu backend needs --memory-limit-mb (a CPU has no fixed memory to fill)");
  if (o.find_max_batch && !o.output.empty())
    throw_usage_error("--find-max-batch prints the largest batch and writes no trace: drop --output (then train at that batch with it)");
  if (o.find_max_batch && o.plan_only) throw_usage_error("--find-max-batch trains to find the batch; --plan-only trains nothing: use one");
  if (o.data_on_device && !o.data.empty()) throw_usage_error("--data-on-device keeps a synthetic batch; it cannot be used with --data");
  if (o.find_max_batch && !o.data.empty()) throw_usage_error("--find-max-batch trains synthetic batches; drop --data");
}

// Options that shape one model only: given for another model they would be silently ignored.
struct Applies {
  const char* option;
  const char* models;  // blank-separated
};
constexpr Applies kModelOptions[] = {
    {"image-size", "resnet50 vgg16"},     {"num-classes", "resnet50 vgg16"},  {"label-smoothing", "resnet50 vgg16"},
    {"resnet-blocks", "resnet50"},        {"resnet-width", "resnet50"},       {"vgg-width", "vgg16"},
    {"vgg-hidden", "vgg16"},              {"dropout", "vgg16 bert_base"},     {"seq-len", "bert_base llama3_8b llama3_2_1b"},
    {"max-predictions", "bert_base"},     {"bert-layers", "bert_base"},       {"bert-hidden", "bert_base"},
    {"bert-heads", "bert_base"},          {"bert-intermediate", "bert_base"}, {"bert-vocab", "bert_base"},
    {"llama-layers", "llama3_8b llama3_2_1b"}, {"llama-hidden", "llama3_8b llama3_2_1b"}, {"llama-heads", "llama3_8b llama3_2_1b"},
    {"peak-tflops", "llama3_8b llama3_2_1b"},
    {"llama-kv-heads", "llama3_8b llama3_2_1b"}, {"llama-ffn", "llama3_8b llama3_2_1b"}, {"llama-vocab", "llama3_8b llama3_2_1b"},
    {"logits-chunk", "llama3_8b llama3_2_1b"}, {"attention", "llama3_8b llama3_2_1b"},
};

bool applies(const Applies& a, const std::string& model) { return (" " + std::string(a.models) + " ").find(" " + model + " ") != std::string::npos; }

constexpr size_t kMaxVariantBytes = 256;

bool given(const po::variables_map& vm, const char* name) { return vm.count(name) && !vm[name].defaulted(); }

// The text of a parsed value, for settings: exact for numbers, so equal text means equal value.
std::string float_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string value_text(const std::string& name, const boost::any& v) {
  if (auto p = boost::any_cast<std::string>(&v)) return *p;
  if (auto p = boost::any_cast<bool>(&v)) return *p ? "true" : "false";
  if (auto p = boost::any_cast<int>(&v)) return std::to_string(*p);
  if (auto p = boost::any_cast<long>(&v)) return std::to_string(*p);
  if (auto p = boost::any_cast<long long>(&v)) return std::to_string(*p);
  if (auto p = boost::any_cast<unsigned long>(&v)) return std::to_string(*p);
  if (auto p = boost::any_cast<unsigned long long>(&v)) return std::to_string(*p);
  if (auto p = boost::any_cast<float>(&v)) return float_text(*p);
  if (auto p = boost::any_cast<double>(&v)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", *p);
    return buf;
  }
  throw_internal_error("value_text", "--" + name + " has a type settings cannot print: add it to value_text",
                       std::source_location::current());
}

// The real-image options: checked here, before MPI starts, so bad input never starts a job.
void validate_image_options(const po::variables_map& vm, const std::string& decoder, const std::string& max_bad, TrainOptions& o) {
  const bool is_bert = o.model == "bert_base" || is_llama_model(o.model);
  if (decoder == "cpu") o.decoder = ImageDecoder::cpu;
  else if (decoder == "gpu") o.decoder = ImageDecoder::gpu;
  else throw_usage_error("--decoder '" + decoder + "' is unknown: use cpu or gpu");
  if (o.decoder == ImageDecoder::gpu && o.backend != BackendKind::cuda)
    throw_usage_error("--decoder gpu decodes with nvJPEG on the cuda backend: add --backend cuda, or use --decoder cpu");
  if (o.loader_threads < 0 || o.loader_threads > kMaxThreads)
    throw_usage_error("--loader-threads must be 0 (automatic) to " + std::to_string(kMaxThreads) + " (got " +
                      std::to_string(o.loader_threads) + ")");
  require_positive("prefetch", o.prefetch);
  // The loader holds --prefetch + 2 decoded batches in pinned host memory (f32 images at most):
  // --prefetch 1000000000 grew until the kernel's OOM killer ended the run.
  const double slot_bytes = static_cast<double>(o.batch_size) * 3.0 * o.image_size * o.image_size * 4.0;
  const double memory = physical_memory_bytes();
  if (!is_bert && !o.data.empty() && memory > 0 && (o.prefetch + 2.0) * slot_bytes > memory / 2)
    throw_usage_error("--prefetch " + std::to_string(o.prefetch) + ": the loader's " + std::to_string(o.prefetch + 2LL) + " batches of " +
                      std::to_string(static_cast<int64_t>(slot_bytes / (1 << 20))) + " MiB would take more than half of the " +
                      std::to_string(static_cast<int64_t>(memory / (1 << 30))) + " GiB this process may use; use fewer");
  // --max-bad-samples: "N" or "P%".
  const bool percent = !max_bad.empty() && max_bad.back() == '%';
  const auto p = percent ? parse_double(std::string_view(max_bad).substr(0, max_bad.size() - 1)) : std::nullopt;
  const auto n = percent ? std::nullopt : parse_int64(max_bad);
  if (percent && p && *p >= 0 && *p <= 100) {
    o.max_bad_fraction = *p / 100.0;
    o.max_bad_count = -1;
  } else if (n && *n >= 0) {
    o.max_bad_count = *n;
  } else {
    throw_usage_error("--max-bad-samples takes a count (like 10) or a percentage (like 0.1%), got '" + max_bad + "'");
  }
  const bool image_flags = !vm["loader-threads"].defaulted() || !vm["prefetch"].defaulted() || !vm["decoder"].defaulted() ||
                           !vm["max-bad-samples"].defaulted() || o.loader_only;
  if (is_bert && image_flags)
    throw_usage_error("--loader-threads, --prefetch, --decoder, --max-bad-samples and --loader-only are for image models (resnet50, vgg16)");
  if (o.data.empty() && image_flags && !is_bert)
    throw_usage_error("--loader-threads, --prefetch, --decoder, --max-bad-samples and --loader-only need --data (real images)");
  if (o.plan_only && !o.output.empty())
    throw_usage_error("--plan-only prints the plan and writes no trace: drop --output");
  if (o.loader_only && !o.output.empty())
    throw_usage_error("--loader-only prints its measurement and writes no trace: drop --output");
  // Options of training, which --loader-only does not do: accepted, they were silently unused.
  if (o.loader_only)
    for (const char* name : {"plan-only", "plan-ranks", "find-max-batch", "profile-ops", "zero", "zero-gather", "grad-accum", "recompute",
                             "optimizer", "clip-grad-norm", "cuda-graph", "memory-limit-mb", "peak-tflops"})
      if (given(vm, name)) throw_usage_error(std::string("--loader-only measures the image loader alone, no model: --") + name + " does not apply (drop it)");
  // A missing path is a usage error before MPI starts; an empty or unreadable dataset is found
  // when rank 0 indexes it (the same one-line error, exit 2, nothing written).
  std::error_code ec;
  if (!o.data.empty() && !is_llama_model(o.model) && o.data.find('{') == std::string::npos && !std::filesystem::exists(o.data, ec))
    throw_usage_error("--data " + o.data + ": no such file or directory");
}

// Llama 3's pretraining recipe (Grattafiori et al. 2024, section 3.4.1): AdamW, beta2 0.95,
// weight decay 0.1 on matrices (never on norms), clip 1.0, cosine after a linear warm-up; lr
// 3e-4 as given (not scaled with the batch). --seq-len defaults to MLPerf's 8,192 tokens,
// --batch-size to 1 sequence.
void validate_llama_options(const po::variables_map& vm, TrainOptions& o) {
  if (vm["seq-len"].defaulted()) o.seq_len = 8192;
  if (vm["batch-size"].defaulted()) o.batch_size = 1;  // one 8,192-token sequence per device
  if (vm["lr"].defaulted()) o.lr = 3e-4f;
  if (vm["weight-decay"].defaulted()) o.weight_decay = 0.1f;
  if (vm["clip-grad-norm"].defaulted()) o.clip_grad_norm = 1.0f;
  if (o.optimizer != "adamw") throw_usage_error("--model " + o.model + " trains with --optimizer adamw (Llama 3's recipe)");
  // --data: Megatron indexed datasets, PREFIX.idx and PREFIX.bin each (data/indexed_dataset.h),
  // one or a blend (train/feed/llama_data.h); the files' contents are checked when they are opened.
  if (!o.data.empty()) (void)parse_token_sources(o.data);
  validate_llama(llama_config(o));
  if (!(std::isfinite(o.peak_tflops) && o.peak_tflops >= 0))
    throw_usage_error("--peak-tflops must be 0 (automatic) or positive and finite (got " + float_text(o.peak_tflops) + ")");
}

// The model's largest weights and its depth, named by the options that shape them: --num-classes
// 2^31 ended in an internal oneDNN error, --bert-layers 10^7 was blamed on --seq-len, and
// --vgg-hidden 2^31 planned a model of 5e10 GiB. One weight must be indexable by the backends
// (2^31 elements); 1,000 layers is far past any published model (Llama 3.1 405B: 126).
void check_layer_sizes(const TrainOptions& o) {
  constexpr double kMaxWeight = 2147483647.0;
  const auto weight = [&](const std::string& what, double rows, double cols, const std::string& options) {
    if (rows * cols > kMaxWeight)
      throw_usage_error(options + ": " + what + " would hold " + float_text(rows * cols) + " elements, more than the 2^31 the backends can index");
  };
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  if (o.model == "resnet50") {
    weight("the classifier (" + std::to_string(32 * o.resnet_width) + " x " + std::to_string(o.num_classes) + ")", 32 * d(o.resnet_width),
           d(o.num_classes), "--num-classes " + std::to_string(o.num_classes) + " with --resnet-width " + std::to_string(o.resnet_width));
  } else if (o.model == "vgg16") {
    const double pooled = d(o.image_size / 32) * d(o.image_size / 32);
    weight("the first fully connected layer", 8 * d(o.vgg_width) * pooled, d(o.vgg_hidden),
           "--vgg-hidden " + std::to_string(o.vgg_hidden) + " with --vgg-width and --image-size");
    weight("the classifier", d(o.vgg_hidden), d(o.num_classes), "--num-classes " + std::to_string(o.num_classes) + " with --vgg-hidden");
  } else if (o.model == "bert_base") {
    if (o.bert_layers > 1000) throw_usage_error("--bert-layers " + std::to_string(o.bert_layers) + " is more than 1000");
    weight("the word embedding", d(o.bert_vocab), d(o.bert_hidden), "--bert-vocab " + std::to_string(o.bert_vocab) + " with --bert-hidden");
    weight("a feed-forward weight", d(o.bert_hidden), d(o.bert_intermediate),
           "--bert-intermediate " + std::to_string(o.bert_intermediate) + " with --bert-hidden " + std::to_string(o.bert_hidden));
  }
}

}  // namespace

ParseOutcome parse_train_options(int argc, const char* const* argv, TrainOptions& o, std::ostream& info) {
  std::string backend = "cpu", precision = "fp32", schedule = "cosine", blocks = "3,4,6,3", decoder = "cpu", max_bad = "0.1%";
  std::string seed = std::to_string(o.seed);  // parsed strictly below: boost wraps "-1" to 2^64-1
  // Parsed as a double and range-checked below: as a float, 1e-50 became 0 and turned clipping off.
  double clip = o.clip_grad_norm;
  po::options_description general("dlperf-train: trains a network on synthetic or real data and measures samples/s");
  // clang-format off
  general.add_options()
    ("help,h", "print this help and exit")
    ("version", "print the version and exit")
    ("model", po::value(&o.model)->default_value(o.model), "network: resnet50 (ResNet-50 v1.5), vgg16 (VGG16, configuration D), bert_base (BERT-base pretraining), llama3_8b (Llama 3.1 8B) or llama3_2_1b (Llama 3.2 1B)")
    ("backend", po::value(&backend)->default_value(backend), "cpu (oneDNN) or cuda (cuDNN, cuBLAS)")
    ("precision", po::value(&precision)->default_value(precision), "fp32 (IEEE fp32, no TF32), tf32 (fp32 with TF32 convolutions and GEMMs; cuda), bf16 (bf16 compute, fp32 master weights) or fp16 (= amp: fp16 compute, fp32 master weights, dynamic loss scaling; cuda)")
    ("batch-size", po::value(&o.batch_size)->default_value(o.batch_size), "samples per device per iteration")
    ("image-size", po::value(&o.image_size)->default_value(o.image_size), "input height and width")
    ("num-classes", po::value(&o.num_classes)->default_value(o.num_classes), "classifier outputs")
    ("iterations", po::value(&o.iterations)->default_value(o.iterations), "training iterations, warm-up included")
    ("warmup", po::value(&o.warmup)->default_value(o.warmup), "first iterations left out of the throughput")
    ("seed", po::value(&seed)->default_value(seed), "seed of weights and synthetic data (0 to 2^64-1)")
    ("threads", po::value(&o.threads)->default_value(o.threads), "compute threads per rank (0: OMP_NUM_THREADS when set, else every CPU "
                                                                 "the launcher bound this rank to; with --pin-threads, its share of the cores)")
    ("print-every", po::value(&o.print_every)->default_value(o.print_every), "progress line every N iterations (0: none)")
    ("plan-only", po::bool_switch(&o.plan_only), "plan every op, list the kernel implementation each will run (oneDNN's choice on "
                                                 "the cpu backend), and exit without training")
    ("conv-autotune", po::bool_switch(&o.conv_autotune), "cuda: time the top cuDNN engine configurations of each convolution shape at plan time and keep the fastest (default: cuDNN's heuristics' first choice)")
    ("deterministic", po::bool_switch(&o.deterministic), "cuda: backward convolutions only on deterministic cuDNN engines, so the same "
                                                         "seed gives the same losses bit for bit (default: the fastest engines, "
                                                         "atomics-based ones included, as PyTorch)");
  po::options_description optim("Optimizer (ResNet-50: SGD with momentum, NVIDIA's v1.5 recipe; VGG16: SGD with momentum, the VGG paper's "
                                 "recipe; BERT: LAMB, NVIDIA's phase-1 recipe)");
  optim.add_options()
    ("optimizer", po::value(&o.optimizer), "sgd, adamw or lamb (default: sgd for resnet50, lamb for bert_base)")
    ("lr", po::value(&o.lr)->default_value(o.lr, "0.256"), "learning rate for a global batch of 256, scaled linearly (sgd) or by the "
                                                          "square root (adamw, lamb); vgg16 default 0.01; bert_base defaults: lamb 3.75e-4, adamw 1e-4, sgd 0.01")
    ("clip-grad-norm", po::value(&clip)->default_value(clip), "clip gradients to this global norm (0: off)")
    ("lr-schedule", po::value(&schedule)->default_value(schedule), "cosine (after warm-up) or constant")
    ("lr-warmup", po::value(&o.lr_warmup)->default_value(o.lr_warmup), "iterations of linear lr warm-up (-1: 10% of --iterations)")
    ("momentum", po::value(&o.momentum)->default_value(o.momentum, "0.875"), "SGD momentum (vgg16: 0.9)")
    ("weight-decay", po::value(&o.weight_decay)->default_value(o.weight_decay, "3.0517578125e-05"), "on weights only, not biases or normalisation (vgg16: 5e-4; bert_base: 0.01)")
    ("label-smoothing", po::value(&o.label_smoothing)->default_value(o.label_smoothing, "0.1"), "cross-entropy label smoothing (vgg16: 0)");
  po::options_description dist("Distributed runs and traces");
  dist.add_options()
    ("output", po::value(&o.output), "append the run to this HDF5 results file (see docs/trace-schema.md)")
    ("bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb, "25"), "gradient allreduce bucket size in MiB")
    ("timeout", po::value(&o.timeout_s)->default_value(o.timeout_s), "seconds to wait for another rank before aborting the job")
    ("repeat-index", po::value(&o.repeat_index)->default_value(o.repeat_index), "repeat number stored with the run")
    ("variant", po::value(&o.variant)->default_value(o.variant, "\"\""), "configuration tag stored with the run (one line of text, at most 256 bytes)")
    ("pin-threads", po::bool_switch(&o.pin_threads), "pin each rank's threads to cores of its own (hwloc: spread over sockets and NUMA nodes; near its GPU on cuda)")
    ("flush-every", po::value(&o.flush_every)->default_value(o.flush_every), "iterations between trace flushes")
    ("lock-timeout", po::value(&o.lock_timeout_s)->default_value(o.lock_timeout_s, "300"), "seconds to wait for the results file's lock (held by another job) before giving up")
    ("max-loss-growth", po::value(&o.max_loss_growth)->default_value(o.max_loss_growth, "10"), "fail the run as diverged when the loss exceeds this many times its first value (at least this value); NaN/Inf always fail; 0: only NaN/Inf");
  std::string comm;
  po::options_description step("The step on the device");
  step.add_options()
    ("comm", po::value(&comm), "gradient communicator: nccl (cuda default) or mpi (cpu; on cuda staged through pinned host memory, "
                               "so ranks may share a GPU)")
    ("cuda-graph", po::bool_switch(&o.cuda_graph), "capture the step at the end of warm-up as CUDA graphs and replay it (cuda)")
    ("data-on-device", po::bool_switch(&o.data_on_device), "keep one synthetic batch on the device instead of copying a batch per step")
    ("profile-ops", po::value(&o.profile_ops)->default_value(o.profile_ops), "time every op's forward and backward over N measured "
                                                                             "iterations; stored in the trace (dlperf-reduce --ops, --timeline)")
    ("find-max-batch", po::bool_switch(&o.find_max_batch), "find the largest --batch-size per device that trains (doubling from "
                                                           "--batch-size, then bisection), print it and exit")
    ("grad-accum", po::value(&o.grad_accum)->default_value(o.grad_accum), "micro-batches of --batch-size per optimizer step; "
                                                                         "gradients are communicated once, on the last (global batch = "
                                                                         "batch x grad-accum x ranks)")
    ("recompute", po::value(&o.recompute)->default_value(o.recompute), "none, or block: keep only each block's input (transformer "
                                                                       "layer, ResNet bottleneck) and recompute its forward just "
                                                                       "before its backward")
    ("zero", po::value(&o.zero)->default_value(o.zero), "0: replicate the optimizer on every rank and allreduce gradients; 1 (ZeRO-1): "
                                                          "each rank keeps the optimizer state of its shard, gradients are "
                                                          "reduce-scattered and the new weights all-gathered; 2 (ZeRO-2): "
                                                          "also frees each bucket's full gradients once reduce-scattered "
                                                          "(either stage: sgd, adamw, lamb)")
    ("zero-gather", po::value(&o.zero_gather)->default_value(o.zero_gather), "with --zero 1/2: forward: each layer of the next forward "
                                                                            "waits for the all-gather of its own weights (the rest "
                                                                            "arrive while it computes); step: every all-gather is "
                                                                            "waited for at the end of the optimizer step")
    ("plan-ranks", po::value(&o.plan_ranks)->default_value(o.plan_ranks), "with --plan-only: print the memory plan for this many "
                                                                          "ranks without starting them (0: the job's ranks)")
    ("memory-limit-mb", po::value(&o.memory_limit_mb)->default_value(o.memory_limit_mb), "cpu: MiB of tensors and buffers the backend "
                                                                                         "may hold, as a GPU's fixed memory (0: none)");
  po::options_description bert("BERT pretraining (--model bert_base)");
  bert.add_options()
    ("seq-len", po::value(&o.seq_len)->default_value(o.seq_len), "tokens per sequence")
    ("max-predictions", po::value(&o.max_predictions)->default_value(o.max_predictions), "masked-LM predictions per sequence")
    ("dropout", po::value(&o.dropout)->default_value(o.dropout, "0.1"), "BERT: hidden and attention dropout probability; VGG16: classifier dropout (default 0.5)");
  po::options_description images("Real data (images for resnet50 and vgg16, shards for bert_base, token datasets for llama*)");
  images.add_options()
    ("data", po::value(&o.data), "images: an ImageNet-style folder tree (DIR or DIR/train holding <class>/*.JPEG) or WebDataset tar "
                                 "shards (a folder of .tar, one .tar, or a pattern like train-{000000..000146}.tar); bert_base: NVIDIA "
                                 "pretraining shards (an .hdf5 file or a directory of them); llama*: Megatron indexed datasets, PREFIX (of PREFIX.idx + "
                                 "PREFIX.bin), a blend W1,PREFIX1,W2,PREFIX2,... (weights normalised) or PREFIX1,PREFIX2,... or a "
                                 "folder of them (weighted by size). Default: synthetic data")
    ("loader-threads", po::value(&o.loader_threads)->default_value(o.loader_threads), "image decoding threads per rank (0: the rank's "
                                                                                        "cores not used by --threads, at least 1)")
    ("prefetch", po::value(&o.prefetch)->default_value(o.prefetch), "batches decoded ahead of the training step")
    ("decoder", po::value(&decoder)->default_value(decoder), "cpu (libjpeg-turbo in the loader threads) or gpu (nvJPEG; cuda backend)")
    ("max-bad-samples", po::value(&max_bad)->default_value(max_bad), "fail when a rank skips more corrupt or unreadable images than this: "
                                                                     "a count, or a percentage of the rank's share of an epoch")
    ("loader-only", po::bool_switch(&o.loader_only), "measure the image loader alone (images/s), no model: is storage or decoding the limit?");
  po::options_description reduced("Reduced networks (tests)");
  reduced.add_options()
    ("resnet-blocks", po::value(&blocks)->default_value(blocks), "bottlenecks per stage")
    ("resnet-width", po::value(&o.resnet_width)->default_value(o.resnet_width), "channels of the first stage")
    ("bert-layers", po::value(&o.bert_layers)->default_value(o.bert_layers), "BERT encoder layers")
    ("bert-hidden", po::value(&o.bert_hidden)->default_value(o.bert_hidden), "BERT hidden size")
    ("bert-heads", po::value(&o.bert_heads)->default_value(o.bert_heads), "BERT attention heads")
    ("bert-intermediate", po::value(&o.bert_intermediate)->default_value(o.bert_intermediate), "BERT feed-forward size")
    ("bert-vocab", po::value(&o.bert_vocab)->default_value(o.bert_vocab), "BERT vocabulary size")
    ("peak-tflops", po::value(&o.peak_tflops)->default_value(o.peak_tflops), "Llama: peak TFLOP/s per device for MFU (0: NVIDIA's "
                                                                              "datasheet figure for the GPU, or a CPU estimate; docs/llm.md)")
    ("llama-layers", po::value(&o.llama_layers)->default_value(o.llama_layers), "Llama layers (-1: the model's)")
    ("llama-hidden", po::value(&o.llama_hidden)->default_value(o.llama_hidden), "Llama hidden size (-1: the model's)")
    ("llama-heads", po::value(&o.llama_heads)->default_value(o.llama_heads), "Llama query heads (-1: the model's)")
    ("llama-kv-heads", po::value(&o.llama_kv_heads)->default_value(o.llama_kv_heads), "Llama key/value heads (-1: the model's)")
    ("llama-ffn", po::value(&o.llama_ffn)->default_value(o.llama_ffn), "Llama feed-forward size (-1: the model's)")
    ("llama-vocab", po::value(&o.llama_vocab)->default_value(o.llama_vocab), "Llama vocabulary size (-1: the model's)")
    ("logits-chunk", po::value(&o.logits_chunk)->default_value(o.logits_chunk), "Llama: tokens per chunk of the output head and "
                                                                                  "loss (logits never whole; backward recomputes "
                                                                                  "them), 0 for the whole batch, or auto: chunks only "
                                                                                  "f32 logits over 1 GiB (docs/llm.md)")
    ("attention", po::value(&o.attention)->default_value(o.attention), "Llama on cuda: auto (cuDNN's fused SDPA in bf16/fp16 "
                                                                       "where it plans, else cuBLAS products, warned), fused "
                                                                       "(cuDNN's, or exit 2), unfused (cuBLAS products, for A/B)")
    ("vgg-width", po::value(&o.vgg_width)->default_value(o.vgg_width), "VGG channels of the first block (blocks: 1x, 2x, 4x, 8x, 8x)")
    ("vgg-hidden", po::value(&o.vgg_hidden)->default_value(o.vgg_hidden), "VGG classifier hidden width");
  // clang-format on
  po::options_description all;
  all.add(general).add(optim).add(images).add(bert).add(dist).add(step).add(reduced);

  po::variables_map vm;
  std::vector<std::string> stray;  // positional words: dlperf-train takes none
  try {
    po::options_description hidden, cmdline;
    hidden.add_options()("stray-argument", po::value(&stray));
    cmdline.add(all).add(hidden);
    po::positional_options_description words;
    words.add("stray-argument", -1);
    const po::parsed_options parsed = po::command_line_parser(argc, argv).options(cmdline).positional(words).run();
    po::store(parsed, vm);
    po::notify(vm);
    check_given_texts(parsed, vm, {"variant"});  // --variant "": no tag, the default
  } catch (const po::error& e) {
    throw_usage_error(std::string(e.what()) + " (see --help)");
  }
  if (!stray.empty()) {
    std::string list;
    for (const auto& w : stray) list += (list.empty() ? "'" : ", '") + w + "'";
    throw_usage_error("unexpected argument " + list + ": dlperf-train takes only --options (see --help)");
  }
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  if (vm.count("help")) {
    info << all << '\n';
    return ParseOutcome::exit_ok;
  }
  if (vm.count("version")) {
    info << "dlperf-train " << DLPERF_VERSION << " (" << DLPERF_GIT_REVISION << ")\n";
    return ParseOutcome::exit_ok;
  }

  if (o.model != "resnet50" && o.model != "vgg16" && o.model != "bert_base" && !is_llama_model(o.model))
    throw_usage_error("--model '" + o.model + "' is unknown: use resnet50, vgg16, bert_base, llama3_8b or llama3_2_1b");
  const bool is_bert = o.model == "bert_base", is_vgg = o.model == "vgg16", is_llama = is_llama_model(o.model);
  if (backend == "cpu") o.backend = BackendKind::cpu;
  else if (backend == "cuda") o.backend = BackendKind::cuda;
  else throw_usage_error("--backend '" + backend + "' is unknown: use cpu or cuda");
  if (precision == "fp32") o.precision = Precision::fp32;
  else if (precision == "bf16") o.precision = Precision::bf16;
  else if (precision == "fp16" || precision == "amp") o.precision = Precision::fp16;
  else if (precision == "tf32") o.precision = Precision::tf32;
  else throw_usage_error("--precision '" + precision + "' is unknown: use fp32 or bf16 (tf32 and fp16 on cuda)");
  if (schedule == "cosine") o.lr_schedule = LrScheduleKind::cosine;
  else if (schedule == "constant") o.lr_schedule = LrScheduleKind::constant;
  else throw_usage_error("--lr-schedule '" + schedule + "' is unknown: use cosine or constant");
  require_positive("batch-size", o.batch_size);
  require_positive("iterations", o.iterations);
  require_positive("num-classes", o.num_classes);
  if (o.num_classes < 2) throw_usage_error("--num-classes must be at least 2 (one class gives a loss of 0 and learns nothing)");
  require_positive("image-size", o.image_size);
  require_positive("resnet-width", o.resnet_width);
  if (o.threads < 0 || o.threads > kMaxThreads)
    throw_usage_error("--threads must be 0 (automatic) to " + std::to_string(kMaxThreads) + " per rank (got " + std::to_string(o.threads) + ")");
  o.threads_automatic = o.threads == 0;
  if (o.threads_automatic) automatic_threads(o);
  if (o.warmup < 0) throw_usage_error("--warmup must be 0 or more (got " + std::to_string(o.warmup) + ")");
  if (o.warmup >= o.iterations)
    throw_usage_error("--warmup " + std::to_string(o.warmup) + " leaves no measured iteration: use fewer than --iterations " +
                      std::to_string(o.iterations));
  if (o.print_every < 0) throw_usage_error("--print-every must be 0 or more");
  require_positive("vgg-width", o.vgg_width);
  require_positive("vgg-hidden", o.vgg_hidden);
  if (is_vgg && (o.image_size < kVggMinImageSize || o.image_size % 32 != 0))
    throw_usage_error("--image-size " + std::to_string(o.image_size) + " does not suit vgg16's five 2x2 pools: use a multiple of 32");
  if (!is_bert && !is_llama && o.image_size < kResNetMinImageSize)
    throw_usage_error("--image-size " + std::to_string(o.image_size) + " is too small for " + o.model + ": use " +
                      std::to_string(kResNetMinImageSize) + " or more");
  // Every comparison below is false for NaN, and inf is refused by name: a non-finite rate or
  // decay would only show up as a run failed as diverged at its first step.
  if (!(std::isfinite(o.lr) && o.lr > 0)) throw_usage_error("--lr must be positive and finite (got " + float_text(o.lr) + ")");
  if (!(o.momentum >= 0 && o.momentum < 1)) throw_usage_error("--momentum must be in [0, 1) (got " + float_text(o.momentum) + ")");
  if (!(std::isfinite(o.weight_decay) && o.weight_decay >= 0))
    throw_usage_error("--weight-decay must be 0 or more, finite (got " + float_text(o.weight_decay) + ")");
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1))
    throw_usage_error("--label-smoothing must be in [0, 1) (got " + float_text(o.label_smoothing) + ")");
  if (o.lr_warmup < -1) throw_usage_error("--lr-warmup must be -1 (10%) or 0 or more");
  if (o.lr_warmup >= o.iterations && o.iterations > 0)
    throw_usage_error("--lr-warmup " + std::to_string(o.lr_warmup) + " is not below --iterations " + std::to_string(o.iterations) +
                      ": the whole run would be warm-up, at a fraction of --lr");
  if (!(o.bucket_mb >= kMinBucketMb && o.bucket_mb <= kMaxBucketMb))
    throw_usage_error("--bucket-mb must be from " + float_text(kMinBucketMb) + " (1 KiB) to " + float_text(kMaxBucketMb) + " (got " +
                      float_text(o.bucket_mb) + ")");
  require_positive("timeout", o.timeout_s);
  // A wait of decades is no bound: a hung rank would hold the job to its Slurm limit (as dlperf-comm).
  if (o.timeout_s > 7 * 86400)
    throw_usage_error("--timeout must be 1 to 604800 seconds (7 days; got " + std::to_string(o.timeout_s) + ")");
  require_positive("flush-every", o.flush_every);
  if (o.repeat_index < 0) throw_usage_error("--repeat-index must be 0 or more");
  if (vm.count("output") && o.output.empty()) throw_usage_error("--output needs a file name");
  if (const std::string why = o.output.empty() ? "" : file_name_problem(o.output); !why.empty())
    throw_usage_error("--output '" + printable(o.output) + "' " + why);
  // The tag heads a report's section and names an HDF5 attribute: one short line. A newline split
  // the markdown heading; 70,000 characters failed in HDF5 after the run had started.
  if (o.variant.size() > kMaxVariantBytes)
    throw_usage_error("--variant is " + std::to_string(o.variant.size()) + " bytes long: at most " + std::to_string(kMaxVariantBytes));
  // The trace reader refuses a tag with control or non-UTF-8 bytes: refuse it here, before the run.
  if (const std::string shown = printable(o.variant); shown != o.variant)
    throw_usage_error("--variant '" + shown + "' holds a control character or invalid UTF-8: use one line of text");
  // A spreadsheet opening dlperf-reduce's CSV runs a cell that starts with = + - @ as a formula.
  if (!o.variant.empty() && std::string_view("=+-@").find(o.variant.front()) != std::string_view::npos)
    throw_usage_error("--variant '" + o.variant + "' starts with '" + o.variant.substr(0, 1) +
                      "', which a spreadsheet reads as a formula: start it with a letter or digit");
  o.resnet_blocks = parse_blocks(blocks);
  if (const auto v = parse_uint64(seed)) o.seed = *v;
  else throw_usage_error("--seed takes an integer from 0 to 18446744073709551615 (got '" + seed + "')");
  // BERT: optimizer and recipe defaults (NVIDIA's phase-1 LAMB; the BERT paper's AdamW).
  if (o.optimizer.empty()) o.optimizer = is_bert ? "lamb" : is_llama ? "adamw" : "sgd";
  if (o.optimizer != "sgd" && o.optimizer != "adamw" && o.optimizer != "lamb")
    throw_usage_error("--optimizer '" + o.optimizer + "' is unknown: use sgd, adamw or lamb");
  // VGG16: the recipe of the VGG paper (Simonyan & Zisserman 2014, section 3.1): batch 256,
  // lr 0.01, momentum 0.9, weight decay 5e-4, dropout 0.5; no label smoothing.
  if (is_vgg) {
    if (vm["lr"].defaulted()) o.lr = 0.01f;
    if (vm["momentum"].defaulted()) o.momentum = 0.9f;
    if (vm["weight-decay"].defaulted()) o.weight_decay = 5e-4f;
    if (vm["label-smoothing"].defaulted()) o.label_smoothing = 0.0f;
    if (vm["dropout"].defaulted()) o.dropout = 0.5f;
  }
  if (is_bert) {
    if (vm["lr"].defaulted()) o.lr = o.optimizer == "lamb" ? 3.75e-4f : o.optimizer == "adamw" ? 1e-4f : 0.01f;
    if (vm["weight-decay"].defaulted()) o.weight_decay = 0.01f;
  }
  if (!(std::isfinite(clip) && clip >= 0))
    throw_usage_error("--clip-grad-norm must be 0 (off) or positive and finite (got " + float_text(clip) + ")");
  if (clip != 0 && !(clip >= FLT_MIN && clip <= FLT_MAX))
    throw_usage_error("--clip-grad-norm " + float_text(clip) + " is outside fp32's normal range (" + float_text(FLT_MIN) + " to " +
                      float_text(FLT_MAX) + "): it would round to 0 (off) or inf");
  o.clip_grad_norm = static_cast<float>(clip);
  if (is_llama) validate_llama_options(vm, o);
  if (!(o.dropout >= 0 && o.dropout < 1)) throw_usage_error("--dropout must be in [0, 1)");
  require_positive("seq-len", o.seq_len);
  require_positive("max-predictions", o.max_predictions);
  require_positive("bert-layers", o.bert_layers);
  require_positive("bert-hidden", o.bert_hidden);
  require_positive("bert-heads", o.bert_heads);
  require_positive("bert-intermediate", o.bert_intermediate);
  require_positive("bert-vocab", o.bert_vocab);
  if (is_bert && o.seq_len > 512) throw_usage_error("--seq-len " + std::to_string(o.seq_len) + " exceeds BERT's 512 positions");
  if (is_bert && o.max_predictions > o.seq_len)
    throw_usage_error("--max-predictions " + std::to_string(o.max_predictions) + " exceeds --seq-len " + std::to_string(o.seq_len));
  if (o.model == "bert_base" && o.bert_vocab <= kBertFirstWord)
    throw_usage_error("--bert-vocab " + std::to_string(o.bert_vocab) + " is too small: the vocabulary holds " + std::to_string(kBertFirstWord) +
                      " special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) and at least one word; use " +
                      std::to_string(kBertFirstWord + 1) + " or more");
  if (is_bert && o.bert_hidden % o.bert_heads != 0)
    throw_usage_error("--bert-hidden " + std::to_string(o.bert_hidden) + " must be a multiple of --bert-heads " + std::to_string(o.bert_heads));
  if (vm.count("data") && o.data.empty()) throw_usage_error("--data needs a file or directory");
  check_layer_sizes(o);
  validate_step_options(o, vm.count("comm") ? comm : "");
  validate_image_options(vm, decoder, max_bad, o);
  if (!(o.lock_timeout_s >= 0 && o.lock_timeout_s <= 7 * 86400))
    throw_usage_error("--lock-timeout must be 0 to 604800 seconds (got " + float_text(o.lock_timeout_s) + ")");
  if (!(o.max_loss_growth == 0 || (o.max_loss_growth > 1 && o.max_loss_growth <= 1e12)))
    throw_usage_error("--max-loss-growth must be 0 (off) or a factor above 1, e.g. 10 (got " + float_text(o.max_loss_growth) + ")");
  // Options that do not shape this model would be silently ignored: refuse them.
  for (const auto& a : kModelOptions)
    if (given(vm, a.option) && !applies(a, o.model))
      throw_usage_error(std::string("--") + a.option + " does not apply to --model " + o.model + " (it is for " + a.models + ")");
  if (given(vm, "momentum") && o.optimizer != "sgd")
    throw_usage_error("--momentum applies to --optimizer sgd only (" + o.optimizer + " has fixed betas)");
  check_activation_sizes(o, 0);  // machine-independent part; dlperf-train checks the memory too

  // Settings: every option with the value the run uses (recipe defaults resolved above).
  for (const auto& d : all.options()) {
    const std::string name = d->long_name();
    if (name == "help" || name == "version") continue;
    bool skip = false;
    for (const auto& a : kModelOptions)
      if (name == a.option && !applies(a, o.model)) skip = true;
    if (skip) continue;
    o.settings.emplace_back(name, vm.count(name) ? value_text(name, vm[name].value()) : "");
  }
  const auto set = [&](const char* name, const std::string& value) {
    for (auto& [n, v] : o.settings)
      if (n == name) v = value;
  };
  set("precision", precision == "amp" ? "fp16" : precision);
  set("optimizer", o.optimizer);
  set("threads", std::to_string(o.threads));
  set("lr", float_text(o.lr));
  set("momentum", float_text(o.momentum));
  set("weight-decay", float_text(o.weight_decay));
  set("label-smoothing", float_text(o.label_smoothing));
  set("dropout", float_text(o.dropout));
  set("comm", o.comm == CommBackend::nccl ? "nccl" : "mpi");
  // Llama's recipe defaults (validate_llama_options) change these from the parser's defaults.
  set("seq-len", std::to_string(o.seq_len));
  set("batch-size", std::to_string(o.batch_size));
  set("clip-grad-norm", float_text(o.clip_grad_norm));
  // The dataset as one name however it was typed (ds, ./ds/, /abs/ds): dlperf-reduce tells
  // datasets apart by it.
  if (!o.data.empty()) {
    std::error_code ec;
    std::string canonical = std::filesystem::weakly_canonical(std::filesystem::absolute(o.data, ec), ec).lexically_normal().string();
    while (canonical.size() > 1 && canonical.back() == '/') canonical.pop_back();
    if (!ec && !canonical.empty()) set("data", canonical);
  }
  return ParseOutcome::run;
}

}  // namespace dlperf

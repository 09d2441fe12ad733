// Activation sizes per model (see size_limits.h). Shapes, per sample:
//   ResNet v1.5  input 3 x H x H; stem conv 7x7/2 -> width x H/2 x H/2; stage 1 output
//                4*width x H/4 x H/4 (the largest tensors are these two, equal in size).
//   VGG16        input 3 x H x H; block 1 convs -> width x H x H (the largest).
//   BERT         (S, intermediate) feed-forward, (heads, S, S) attention scores,
//                (P, vocab) masked-LM logits.
//   Llama        (T, vocab) logits, (T, ffn) feed-forward; per block it keeps at least x, the
//                norms' outputs, q, o (6 x hidden) and the feed-forward's three (T, ffn), in the
//                compute dtype (2 bytes at least). The training state (weights, gradients,
//                master copy, optimizer moments) is the memory plan's (train/memory/memory_plan.cpp).
#include "train/memory/size_limits.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "core/error.h"
#include "train/llama_options.h"

namespace dlperf {
namespace {

constexpr double kMaxTensorElements = 2147483647.0;  // 2^31 - 1

bool is_cnn(const TrainOptions& o) { return o.model != "bert_base" && !is_llama_model(o.model); }

std::string human(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// The size flag to name: the input size of the model (the batch when that is modest).
std::string size_flag(const TrainOptions& o) {
  if (is_cnn(o)) return "--image-size " + std::to_string(o.image_size);
  return "--seq-len " + std::to_string(o.seq_len);
}

}  // namespace

double largest_activation_elements(const TrainOptions& o) {
  const double b = static_cast<double>(o.batch_size);
  if (o.model == "resnet50") {
    const double h = static_cast<double>(o.image_size), w = static_cast<double>(o.resnet_width);
    return b * std::max({3 * h * h, w * (h / 2) * (h / 2), 4 * w * (h / 4) * (h / 4)});
  }
  if (o.model == "vgg16") {
    const double h = static_cast<double>(o.image_size), w = static_cast<double>(o.vgg_width);
    return b * std::max(3.0, w) * h * h;
  }
  if (is_llama_model(o.model)) {
    const LlamaConfig c = llama_config(o);
    const double tokens = b * static_cast<double>(o.seq_len);
    const double head_rows = c.logits_chunk > 0 ? static_cast<double>(c.logits_chunk) : tokens;  // --logits-chunk
    return std::max(head_rows * static_cast<double>(c.vocab), tokens * static_cast<double>(std::max(c.ffn, c.hidden)));
  }
  const double s = static_cast<double>(o.seq_len);
  return b * std::max({s * static_cast<double>(o.bert_intermediate), static_cast<double>(o.bert_heads) * s * s,
                       static_cast<double>(o.max_predictions) * static_cast<double>(o.bert_vocab)});
}

double min_activation_bytes(const TrainOptions& o) {
  const double b = static_cast<double>(o.batch_size), elem = 4;  // fp32 (master copies and most saved tensors)
  if (o.model == "resnet50") {
    const double h = static_cast<double>(o.image_size), w = static_cast<double>(o.resnet_width);
    return elem * b * (3 * h * h + 3 * w * (h / 2) * (h / 2));  // input; stem conv, norm and ReLU outputs
  }
  if (o.model == "vgg16") {
    const double h = static_cast<double>(o.image_size), w = static_cast<double>(o.vgg_width);
    return elem * b * (3 * h * h + 4 * w * h * h);  // input; block 1's two convs and their ReLUs
  }
  if (is_llama_model(o.model)) {
    const LlamaConfig c = llama_config(o);
    const double tokens = b * static_cast<double>(o.seq_len);
    const double per_block = 6.0 * static_cast<double>(c.hidden) + 3.0 * static_cast<double>(c.ffn);
    // --recompute block: every block keeps only its output (H per token); one block's full set
    // lives at a time, in the buffers all blocks share.
    const double kept = o.recompute == "block" ? static_cast<double>(c.layers) * static_cast<double>(c.hidden) + per_block
                                               : static_cast<double>(c.layers) * per_block;
    // The logits: one chunk of rows with --logits-chunk, f32 in fp32 and tf32 runs.
    const double head_rows = c.logits_chunk > 0 ? static_cast<double>(c.logits_chunk) : tokens;
    const double logit_bytes = static_cast<double>(llama_logit_bytes(o));
    return 2.0 * tokens * kept + logit_bytes * head_rows * static_cast<double>(c.vocab);
  }
  const double s = static_cast<double>(o.seq_len), hid = static_cast<double>(o.bert_hidden);
  const double layer = 4 * s * hid + static_cast<double>(o.bert_heads) * s * s;
  // --recompute block: every layer keeps its output (s x hidden); one layer's full set at a time.
  if (o.recompute == "block") return elem * b * (static_cast<double>(o.bert_layers) * s * hid + layer);
  return elem * b * static_cast<double>(o.bert_layers) * layer;
}

void check_activation_sizes(const TrainOptions& o, double memory_bytes) {
  const double largest = largest_activation_elements(o);
  if (largest > kMaxTensorElements)
    throw_usage_error(size_flag(o) + " is too large: with --batch-size " + std::to_string(o.batch_size) + " one activation of " +
                      o.model + " would hold " + human(largest) +
                      " elements, more than the 2^31 the backends can index; use a smaller " +
                      (is_cnn(o) ? "--image-size" : "--seq-len") + " or --batch-size");
  const double need = min_activation_bytes(o);
  if (memory_bytes > 0 && need > memory_bytes)
    throw_usage_error(size_flag(o) + " is too large: with --batch-size " + std::to_string(o.batch_size) + ", " + o.model +
                      " needs at least " + gib(need) + " of activations per rank, more than this machine's " +
                      gib(memory_bytes) + " of memory; use a smaller " + (is_cnn(o) ? "--image-size" : "--seq-len") +
                      " or --batch-size");
}

namespace {

// The number in `path` ("max", a missing file, or v1's 2^63-rounded "no limit": 0).
double limit_in(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::string text;
  if (!(f >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0.0;
  const double v = std::strtod(text.c_str(), nullptr);
  return v > 0.0 && v < 0x1p62 ? v : 0.0;
}

}  // namespace

double cgroup_memory_limit_bytes(const std::string& root, const std::string& self) {
  double tightest = 0.0;
  std::istringstream lines(self);
  std::string line;
  while (std::getline(lines, line)) {  // "hierarchy:controllers:path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string group = line.substr(b + 1);
    std::filesystem::path base;
    const char* file = nullptr;
    if (line.compare(0, a + 1, "0:") == 0 && controllers.empty()) {  // v2, the unified hierarchy
      base = root;
      file = "memory.max";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {  // v1, the memory controller's
      base = std::filesystem::path(root) / "memory";
      file = "memory.limit_in_bytes";
    } else {
      continue;
    }
    // The group and each above it, up to the hierarchy's root (a container's own, where the
    // path shown is "/" inside a cgroup namespace).
    for (;;) {
      const double v = limit_in(base / std::filesystem::path(group).relative_path() / file);
      if (v > 0.0 && (tightest == 0.0 || v < tightest)) tightest = v;
      if (group.empty() || group == "/") break;
      const size_t slash = group.find_last_of('/');
      group = slash == std::string::npos || slash == 0 ? "/" : group.substr(0, slash);
    }
  }
  return tightest;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  double bytes = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
  std::ifstream self("/proc/self/cgroup");
  const std::string text((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  const double limit = cgroup_memory_limit_bytes("/sys/fs/cgroup", text);
  if (limit > 0.0 && (bytes == 0.0 || limit < bytes)) bytes = limit;
  return bytes;
}

}  // namespace dlperf

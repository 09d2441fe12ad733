#include "train/feed/data_report.h"

#include <algorithm>
#include <cstdio>

#include "train/feed/llama_data.h"
#include "train/registry.h"

namespace dlperf {

void describe_data(const TrainOptions& o, const WorldInfo& w, const data::Dataset* dataset, RunInfo& info) {
  info.data_path = o.data;
  info.data_source = o.data.empty() ? "synthetic" : dataset ? to_string(dataset->layout()) : o.model.rfind("llama", 0) == 0 ? "megatron" : "hdf5";
  if (dataset) {
    info.decoder = to_string(o.decoder);
    info.loader_threads = loader_threads(o, w);
  }
}

std::string data_banner(const TrainOptions& o, const WorldInfo& w, const data::Dataset* dataset, const Model& model) {
  if (!dataset) return o.data.empty() ? (o.model == "bert_base" || o.model.rfind("llama", 0) == 0 ? "synthetic tokens" : "synthetic images (generated once, cycled)")
                                      : o.model.rfind("llama", 0) == 0 ? "Megatron indexed dataset " + describe_token_sources(o.data)
                                                                       : "BERT pretraining shards " + o.data;
  const InputSpec in = *model.raw_input("images");
  char line[512];
  std::snprintf(line, sizeof line,
                "%s (%s, %zu images, %lld classes); %s decoder, %d loader thread%s per rank, %d batches prefetched; input %lldx%lldx%lldx%lld "
                "%s %s",
                dataset->root().c_str(), to_string(dataset->layout()), dataset->size(), static_cast<long long>(dataset->num_classes()),
                to_string(o.decoder), loader_threads(o, w), loader_threads(o, w) == 1 ? "" : "s", o.prefetch,
                static_cast<long long>(in.dims[0]), static_cast<long long>(in.dims[1]), static_cast<long long>(in.dims[2]),
                static_cast<long long>(in.dims[3]), to_string(in.dtype), in.layout == Layout::channels_last ? "NHWC" : "NCHW");
  return line;
}

std::string loader_summary(const std::vector<RankTrace>& ranks, int64_t warmup, const DataStats& mine, int threads) {
  double images_per_s = 0, bytes_per_s = 0;
  int64_t bad = 0;
  std::vector<int64_t> depth;
  std::vector<double> wait;
  for (const auto& t : ranks) {
    bad += t.data_bad_samples;
    const auto n = static_cast<int64_t>(t.iterations.size());
    if (n <= warmup || warmup < 1) continue;
    const IterationTiming &a = t.iterations[static_cast<size_t>(warmup - 1)], &b = t.iterations.back();
    if (b.end > a.end) {
      images_per_s += static_cast<double>(b.data_images - a.data_images) / (b.end - a.end);
      bytes_per_s += static_cast<double>(b.data_bytes_read - a.data_bytes_read) / (b.end - a.end);
    }
    for (auto i = static_cast<size_t>(warmup); i < t.iterations.size(); ++i) {
      depth.push_back(t.iterations[i].data_queue_depth);
      wait.push_back(t.iterations[i].phase_seconds[static_cast<int>(Phase::data)]);
    }
  }
  std::sort(depth.begin(), depth.end());
  std::sort(wait.begin(), wait.end());
  char line[512];
  std::snprintf(line, sizeof line,
                "loader: %.1f images/s decoded, %.1f MB/s read (all ranks, measured window); batches ready when the step asked: "
                "median %lld, min %lld; data wait median %.2f ms; %lld bad sample%s; rank 0's %d loader thread%s busy %.0f%%\n",
                images_per_s, bytes_per_s / 1e6, static_cast<long long>(depth.empty() ? 0 : depth[depth.size() / 2]),
                static_cast<long long>(depth.empty() ? 0 : depth.front()), 1e3 * (wait.empty() ? 0.0 : wait[wait.size() / 2]),
                static_cast<long long>(bad), bad == 1 ? "" : "s", threads, threads == 1 ? "" : "s",
                mine.running_seconds > 0 ? 100.0 * mine.busy_seconds / (threads * mine.running_seconds) : 0.0);
  return line;
}

}  // namespace dlperf

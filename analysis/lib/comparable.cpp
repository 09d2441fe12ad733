// The benchmark definitions (see comparable.h): dlperf-train's defaults, which are the
// published workloads' settings (train/options.h).
#include "comparable.h"

#include <cstring>

namespace dlperf::analysis {
namespace {

struct Standard {
  const char* models;  // blank-separated
  const char* name;
  const char* value;
};
constexpr Standard kStandards[] = {
    {"resnet50 vgg16", "image-size", "224"},   {"resnet50 vgg16", "num-classes", "1000"},
    {"resnet50", "resnet-blocks", "3,4,6,3"},  {"resnet50", "resnet-width", "64"},
    {"vgg16", "vgg-width", "64"},              {"vgg16", "vgg-hidden", "4096"},
    {"bert_base", "seq-len", "128"},           {"bert_base", "max-predictions", "20"},
    {"bert_base", "bert-layers", "12"},        {"bert_base", "bert-hidden", "768"},
    {"bert_base", "bert-heads", "12"},         {"bert_base", "bert-intermediate", "3072"},
    {"bert_base", "bert-vocab", "30522"},      {"resnet50 vgg16 bert_base", "data", "synthetic"},
    // Llama: -1 is "the model's own size" (dlperf-train's default); 8,192 tokens as MLPerf's.
    {"llama3_8b llama3_2_1b", "seq-len", "8192"},     {"llama3_8b llama3_2_1b", "llama-layers", "-1"},
    {"llama3_8b llama3_2_1b", "llama-hidden", "-1"},  {"llama3_8b llama3_2_1b", "llama-heads", "-1"},
    {"llama3_8b llama3_2_1b", "llama-kv-heads", "-1"}, {"llama3_8b llama3_2_1b", "llama-ffn", "-1"},
    {"llama3_8b llama3_2_1b", "llama-vocab", "-1"},
};

bool for_model(const Standard& s, const std::string& model) {
  return (" " + std::string(s.models) + " ").find(" " + model + " ") != std::string::npos;
}

}  // namespace

std::string standard_value(const std::string& model, const std::string& name) {
  for (const auto& s : kStandards)
    if (name == s.name && for_model(s, model)) return s.value;
  return "";
}

bool is_network_size(const std::string& name) {
  for (const char* n : {"resnet-blocks", "resnet-width", "vgg-width", "vgg-hidden", "bert-layers", "bert-hidden", "bert-heads",
                        "bert-intermediate", "bert-vocab", "llama-layers", "llama-hidden", "llama-heads", "llama-kv-heads",
                        "llama-ffn", "llama-vocab"})
    if (name == n) return true;
  return false;
}

std::vector<std::pair<std::string, std::string>> nonstandard_settings(const ConfigKey& key) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : key.details) {
    const std::string standard = standard_value(key.model, name);
    if (!standard.empty() && value != standard) out.emplace_back(name, value);
  }
  return out;
}

bool is_published_workload(const ConfigResult& c) {
  for (const auto& [name, v] : c.nonstandard)
    if (name != "data") return false;
  return true;
}

std::string differences(const ConfigResult& c, bool network) {
  std::string s;
  for (const auto& [name, v] : c.nonstandard)
    if (is_network_size(name) == network) {
      const std::string standard = standard_value(c.key.model, name);
      s += (s.empty() ? "" : ", ") + name + " " + v + " (benchmark: " + (standard == "-1" ? std::string("the model's") : standard) + ")";
    }
  return s;
}

std::string differences(const ConfigResult& c) {
  const std::string net = differences(c, true), rest = differences(c, false);
  return net + (net.empty() || rest.empty() ? "" : ", ") + rest;
}

bool is_reference_kernel(const KernelRecord& k, const std::string& precision) {
  const std::string& i = k.impl;
  if (i.rfind("ref", 0) == 0 || i.find(":ref") != std::string::npos || i.find("_ref") != std::string::npos) return true;
  return precision != "fp32" && i.find("[no tensor cores]") != std::string::npos;
}

}  // namespace dlperf::analysis

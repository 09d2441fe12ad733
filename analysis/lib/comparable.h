// What makes a configuration the benchmark its model's name promises (issue 27 item 5): the
// settings of the published workloads (ResNet-50 v1.5 and VGG16 on 224x224 ImageNet images,
// 1000 classes; BERT-base with sequences of 128 and 20 masked positions) and the full-size
// networks. A run that differs is still measured, but its label says how, its report says
// what that means, and the published DLPerf figures are not set beside it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "reduce.h"

namespace dlperf::analysis {

// The key's details whose recorded value differs from the model's benchmark definition, as
// (name, value), by name. Details a trace did not record are not judged.
std::vector<std::pair<std::string, std::string>> nonstandard_settings(const ConfigKey& key);

// Whether published figures (DLPerf's V100 table, a DLPerf result file) may stand beside this
// configuration: the benchmark's image size or sequence length and full network. The data
// source is not judged (DLPerf's runs read ImageNet; synthetic data is the usual stand-in).
bool is_published_workload(const ConfigResult& c);
// "image-size 128 (benchmark: 224), resnet-width 8 (64)": what keeps a configuration from
// being the benchmark its model names. `network`: only the network-size settings, or the rest.
std::string differences(const ConfigResult& c, bool network);
// Both kinds, network sizes first.
std::string differences(const ConfigResult& c);

// A setting that shrinks the network itself (--resnet-width, --bert-layers, ...).
bool is_network_size(const std::string& name);
// The setting's benchmark value for `model` ("" when it has none).
std::string standard_value(const std::string& model, const std::string& name);

// Whether a planned kernel is a reference (fallback) implementation: oneDNN's ref:* kernels,
// or a GPU convolution without tensor cores at a precision benchmarked for them. The same
// rule dlperf-train warns by (backend/onednn/context.cpp, backend/cuda/context.cpp).
bool is_reference_kernel(const KernelRecord& k, const std::string& precision);

}  // namespace dlperf::analysis

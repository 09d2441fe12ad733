// The published DLPerf V100 figures (analysis/reference/dlperf_v100_published.csv, a copy
// of the DLPerf reports' tables) and how a measured configuration is matched to them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reduce.h"

namespace dlperf::analysis {

struct ReferenceRow {
  std::string system, model, precision, variant;
  int64_t batch_per_device = 0;  // 0 when not published
  int64_t nodes = 0, gpus_per_node = 0;
  double samples_per_s = 0;
  std::optional<double> speedup;
};
using ReferenceTable = std::vector<ReferenceRow>;

// "fp32" for fp32 and tf32 (TF32 is how fp32 trains since Ampere), "mixed" for fp16, bf16 and
// DLPerf's "amp".
std::string precision_class(const std::string& precision);

ReferenceTable load_reference(const std::string& csv_path);  // throws Error(usage) on a bad file

// The published row for the same model family (resnet50*, vgg16, bert*), precision class
// (fp32, or mixed = fp16/bf16/amp) and nodes x GPUs per node; an equal batch wins, then an
// empty variant, then file order. Empty when nothing matches.
std::optional<ReferenceRow> match_reference(const ReferenceTable& t, const ConfigKey& key, int64_t nodes,
                                            int64_t devices_per_node);

}  // namespace dlperf::analysis

// Regression check against a baseline: another results file (reduced with the same method)
// or a JSON file in DLPerf's result shape. Per configuration x scale point present in both:
// ratio = measured median / baseline median; a ratio below the tolerance is a regression.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "reduce.h"

namespace dlperf::analysis {

struct BaselinePoint {
  std::string key;    // configuration label, or the bare model name in a DLPerf JSON
  std::string point;  // "2n8g"
  double median = 0;
  int64_t batch_per_device = 0;  // 0 when the baseline does not say
};

// "resnet50" for any of DLPerf's names of ResNet-50 v1.5 (rn50, r50, resnet50v1.5), "vgg16",
// "bert_base" (bert-base-adam-training, ...); other names unchanged.
std::string model_family(const std::string& name);

std::vector<BaselinePoint> baseline_from_reduction(const Reduction& r);
std::vector<BaselinePoint> baseline_from_json(const std::string& path);  // throws Error(usage)

struct Comparison {
  std::string config, point;
  double measured = 0, baseline = 0, ratio = 0;
  bool regression = false;
  bool matched = true;  // false: the baseline has no such point (shown as such, never a pass)
};

// Matches by label, else by model family (model_family) with an equal (or unstated) batch.
// Every measured point gets a row, in order; one the baseline lacks has matched = false.
std::vector<Comparison> compare(const Reduction& measured, const std::vector<BaselinePoint>& baseline, double tolerance);
void write_comparison(std::ostream& os, const std::vector<Comparison>& rows, double tolerance);

}  // namespace dlperf::analysis

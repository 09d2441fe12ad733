// Regression check against a baseline: another results file (reduced with the same method)
// or a JSON file in DLPerf's result shape. Per configuration x scale point present in both:
// ratio = measured median / baseline median; a ratio below the tolerance is a regression.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "reduce.h"

namespace dlperf::analysis {

struct BaselinePoint {
  std::string key;    // configuration label, or the bare model name in a DLPerf JSON
  std::string point;  // "2n8g"
  double median = 0;
  int64_t batch_per_device = 0;  // 0 when the baseline does not say
  // The whole configuration: from a results file, or dlperf-reduce's JSON ("config"); empty in
  // DLPerf's own JSON. A label alone is not enough: it names only what differed within its set.
  std::optional<ConfigKey> config;
  // A DLPerf JSON (no config): the precision its model key or else its file name states
  // ("rn50_fp16", "resnet50_amp_result.json"); "" when neither does.
  std::string precision;
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
  std::string why_not;  // when not matched: "not in the baseline", or why the match is ambiguous;
                        // matched: why a regression has no ratio ("no measured run (failed or partial)")
};

// A baseline with configurations matches on everything that sets the work (model, precision,
// backend, variant, batch and every detail but is_identity_detail's): another machine or build
// is compared, another image size or dataset layout is not. When several baseline
// configurations match, the one of the same machine and build wins, else none does. A DLPerf
// JSON (bare model names) matches by model family (model_family) with an equal (or unstated)
// batch, the same precision class (fp32/tf32 or mixed) where the baseline states one, and only
// the published workload (comparable.h: no reduced network, the benchmark's image size or
// sequence length); a label of dlperf's own without its configuration matches only itself.
// Every measured point gets a row, in order; one the baseline lacks has matched = false. A point
// whose runs all failed or stopped early is a regression where the baseline has it, else no row.
std::vector<Comparison> compare(const Reduction& measured, const std::vector<BaselinePoint>& baseline, double tolerance);
void write_comparison(std::ostream& os, const std::vector<Comparison>& rows, double tolerance);

}  // namespace dlperf::analysis

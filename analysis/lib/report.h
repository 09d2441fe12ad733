// Renderings of a Reduction: the markdown tables of the DLPerf reports (plus repeat
// statistics, phase breakdown, stragglers, notes), CSV, DLPerf-shaped JSON and an SVG plot.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "reduce.h"
#include "reference.h"

namespace dlperf::analysis {

struct ReportOptions {
  double cv_warning = 0.05;  // warn when a group's coefficient of variation exceeds this
  const ReferenceTable* reference = nullptr;  // published V100 figures shown beside measured ones
};

void write_markdown(std::ostream& os, const Reduction& r, const MethodOptions& method, const ReportOptions& opt);
// One row per configuration x node/device count, every statistic, plain numbers.
void write_csv(std::ostream& os, const Reduction& r);
// {label: {"1n1g": {"average_speed", "median_speed", "batch_size_per_device", "speedup", "efficiency",
// "runs", "cv", memory, LLM figures, "config": the whole configuration (for --compare)}}}
void write_json(std::ostream& os, const Reduction& r);
// Two panels, throughput and speedup against device count (log2 axis), ideal lines dashed.
void write_svg(std::ostream& os, const Reduction& r);

}  // namespace dlperf::analysis

// Machine-readable outputs: CSV (one row per configuration x scale point, every statistic)
// and JSON in the shape of DLPerf's result files, keyed by configuration label then "NnMg"
// ("NnMr" for CPU-backend ranks).
#include <cmath>
#include <cstdio>
#include <ostream>

#include "format.h"
#include "report.h"

namespace dlperf::analysis {
namespace {

// Text cells only. One starting with = + - @ (a --variant from a trace that dlperf-train did not
// check) would run as a formula in a spreadsheet: a leading ' keeps it text (OWASP's advice).
std::string csv_field(const std::string& text) {
  const bool formula = !text.empty() && std::string("=+-@\t\r").find(text.front()) != std::string::npos;
  const std::string s = formula ? "'" + text : text;
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string json_string(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') q += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(ch));
      q += esc;
      continue;
    }
    q += ch;
  }
  return q + "\"";
}

// A recorded count as a JSON number; text if a trace recorded something else.
std::string json_count(const std::string& v) {
  const bool digits = !v.empty() && v.size() < 10 && v.find_first_not_of("0123456789") == std::string::npos;
  return digits ? v : json_string(v);
}

}  // namespace

void write_csv(std::ostream& os, const Reduction& r) {
  // device: "gpu", or "cpu_rank" on the CPU backend (one rank stands for one device there).
  // settings: the details that tell this configuration apart from another with the same label base.
  os << "config,model,precision,backend,variant,batch_size_per_device,node_num,devices_per_node,device_num,device,runs,"
        "excluded,median_speed,average_speed,min_speed,max_speed,cv,speedup,efficiency,settings,tokens_per_s,tflops_per_device,mfu,"
        "grad_accum,zero\n";
  for (const auto& c : r.configs) {
    std::string settings;
    for (const auto& [name, v] : c.shown) settings += (settings.empty() ? "" : ";") + name + "=" + v;
    for (const auto& p : c.points) {
      const int excluded = p.excluded_partial + p.excluded_failed + p.excluded_short;
      os << csv_field(c.label) << ',' << csv_field(c.key.model) << ',' << csv_field(c.key.precision) << ','
         << csv_field(c.key.backend) << ',' << csv_field(c.key.variant) << ',' << c.key.batch_per_device << ','
         << p.nodes << ',' << p.devices_per_node << ',' << p.devices() << ',' << (c.key.backend == "cpu" ? "cpu_rank" : "gpu")
         << ',' << p.stats.runs << ',' << excluded;
      if (p.stats.runs > 0)
        os << ',' << exact(p.stats.median) << ',' << exact(p.stats.mean) << ',' << exact(p.stats.min) << ','
           << exact(p.stats.max) << ',' << (p.stats.runs > 1 ? exact(p.stats.cv) : "");  // one run: no spread
      else
        os << ",,,,,";
      os << ',' << (p.speedup ? exact(*p.speedup) : "") << ',' << (p.efficiency ? exact(*p.efficiency) : "") << ','
         << csv_field(settings);
      const auto l = llm_point(c, p);  // LLM runs only (docs/llm.md); empty otherwise
      os << ',' << (l ? exact(l->tokens_per_s) : "") << ',' << (l ? exact(l->tflops_per_device) : "") << ','
         << (l && l->mfu ? exact(*l->mfu) : "") << ',';
      // Samples/s count every micro-batch: a step of grad_accum x batch_size_per_device per device.
      os << csv_field(c.key.detail("grad-accum", "1")) << ',' << csv_field(c.key.detail("zero", "0")) << '\n';
    }
  }
}

// JSON has no inf or nan: a non-finite figure (an absurd FLOP count recorded per token) is null,
// not a token that makes the whole file unreadable.
std::string json_number(double v) { return std::isfinite(v) ? exact(v) : "null"; }

void write_json(std::ostream& os, const Reduction& r) {
  os << "{";
  bool first_cfg = true;
  for (const auto& c : r.configs) {
    os << (first_cfg ? "\n  " : ",\n  ") << json_string(c.label) << ": {";
    first_cfg = false;
    bool first = true;
    for (const auto& p : c.points) {
      if (p.stats.runs == 0) continue;
      os << (first ? "\n    " : ",\n    ") << json_string(point_name(c.key.backend, p.nodes, p.devices_per_node))
         << ": {\"average_speed\": " << json_number(p.stats.mean) << ", \"median_speed\": " << json_number(p.stats.median)
         << ", \"batch_size_per_device\": " << c.key.batch_per_device
         << ", \"grad_accum\": " << json_count(c.key.detail("grad-accum", "1")) << ", \"zero\": " << json_count(c.key.detail("zero", "0"))
         << ", \"speedup\": " << (p.speedup ? json_number(*p.speedup) : "null")
         << ", \"efficiency\": " << (p.efficiency ? json_number(*p.efficiency) : "null") << ", \"runs\": " << p.stats.runs
         << ", \"cv\": " << (p.stats.runs > 1 ? json_number(p.stats.cv) : "null")
         << ", \"memory_plan_bytes\": " << p.memory_plan_bytes << ", \"allocated_peak_bytes\": " << p.allocated_peak_bytes
         << ", \"peak_memory_bytes\": " << p.peak_memory_bytes;
      if (const auto l = llm_point(c, p))
        os << ", \"tokens_per_s\": " << json_number(l->tokens_per_s) << ", \"tflops_per_device\": " << json_number(l->tflops_per_device)
           << ", \"mfu\": " << (l->mfu ? json_number(*l->mfu) : "null");
      // The whole configuration, so that --compare against this file matches the same work
      // (a label names only what differed within its own set of runs).
      os << ", \"config\": {\"model\": " << json_string(c.key.model) << ", \"precision\": " << json_string(c.key.precision)
         << ", \"backend\": " << json_string(c.key.backend) << ", \"variant\": " << json_string(c.key.variant)
         << ", \"batch_size_per_device\": " << c.key.batch_per_device << ", \"details\": {";
      bool first_detail = true;
      for (const auto& [name, v] : c.key.details) {
        os << (first_detail ? "" : ", ") << json_string(name) << ": " << json_string(v);
        first_detail = false;
      }
      os << "}}}";
      first = false;
    }
    os << (first ? "}" : "\n  }");
  }
  os << (first_cfg ? "}\n" : "\n}\n");
}

}  // namespace dlperf::analysis

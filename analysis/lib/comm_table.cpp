#include "comm_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "core/parse_number.h"

namespace dlperf::analysis {
namespace {

constexpr const char* kMagic = "dlperf-comm record 1";  // = comm/allreduce_bench.h kBenchRecordMagic
constexpr uint64_t kBandwidthBytes = uint64_t{1} << 20;  // smaller messages measure latency, not links

double number(const std::string& where, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v >= 0)) throw_usage_error(where + ": '" + text + "' is not a non-negative number");
  return v;
}

// Bytes per element of a dlperf-comm type name (comm/communicator.cpp to_string(DataType)); 0 if unknown.
size_t element_bytes(const std::string& type) {
  static const std::pair<const char*, size_t> kTypes[] = {{"int8", 1},  {"uint8", 1}, {"int32", 4},    {"uint32", 4}, {"int64", 8},
                                                          {"uint64", 8}, {"half", 2},  {"bfloat16", 2}, {"float", 4},  {"double", 8}};
  for (const auto& [name, bytes] : kTypes)
    if (type == name) return bytes;
  return 0;
}

bool factor_known(const std::string& op) { return op == "allreduce" || op == "reduce_scatter" || op == "all_gather"; }

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string size_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// A record whose numbers contradict each other was edited or damaged, and its table would
// mislead (a PASS over wrong elements, a bandwidth its own time does not give): refused like a
// truncated one. Tolerances cover the record's rounding (times to 0.001 us, GB/s to 0.0001).
void check_consistent(const std::string& path, const CommRecord& rec, const std::vector<std::pair<double, double>>& algbw,
                      const std::vector<int>& row_lines, uint64_t row_wrong) {
  const std::string status = rec.result.at("status");
  if (status != "PASS" && status != "FAIL" && status != "NO_PEERS")
    throw_usage_error(path + ": status=" + status + " is not PASS, FAIL or NO_PEERS");
  if (status == "PASS" && row_wrong > 0)
    throw_usage_error(path + ": status=PASS, but its rows count " + std::to_string(row_wrong) + " wrong elements");
  if (status == "NO_PEERS" && rec.ranks != 1) throw_usage_error(path + ": status=NO_PEERS with ranks=" + std::to_string(rec.ranks));
  if (status == "PASS" && rec.ranks == 1) throw_usage_error(path + ": status=PASS with ranks=1 (one rank crosses no link: NO_PEERS)");
  if (const auto it = rec.result.find("sizes"); it != rec.result.end() && it->second != std::to_string(rec.rows.size()))
    throw_usage_error(path + ": sizes=" + it->second + " but " + std::to_string(rec.rows.size()) + " rows");
  for (const auto& [key, row] : {std::pair{"min_bytes", rec.rows.empty() ? nullptr : &rec.rows.front()},
                                 std::pair{"max_bytes", rec.rows.empty() ? nullptr : &rec.rows.back()}})
    if (const auto it = rec.result.find(key); row && it != rec.result.end() && it->second != std::to_string(row->bytes))
      throw_usage_error(path + ": " + key + "=" + it->second + " but the rows run from " + std::to_string(rec.rows.front().bytes) + " to " +
                        std::to_string(rec.rows.back().bytes) + " bytes");
  const std::string& backend = rec.result.at("backend");
  if (backend != "mpi" && backend != "nccl") throw_usage_error(path + ": backend=" + backend + " is not mpi or nccl (dlperf-comm's backends)");
  const std::string& type = rec.result.at("type");
  const size_t elem = element_bytes(type);
  if (elem == 0)
    throw_usage_error(path + ": type=" + type + " is not a dlperf-comm type (int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double)");
  if ((rec.op == "reduce_scatter" || rec.op == "all_gather") && type != "float")
    throw_usage_error(path + ": op=" + rec.op + " with type=" + type + " (dlperf-comm measures the sharded ops in float only)");
  if (const auto it = rec.result.find("redop"); it != rec.result.end() && factor_known(rec.op) &&
      it->second != (rec.op == "all_gather" ? "none" : "sum"))
    throw_usage_error(path + ": redop=" + it->second + " for op=" + rec.op + " (dlperf-comm writes " + (rec.op == "all_gather" ? "none" : "sum") + ")");
  for (size_t i = 0; i < rec.rows.size(); ++i)
    if (rec.rows[i].count * elem != rec.rows[i].bytes)
      throw_usage_error(path + ":" + std::to_string(row_lines[i]) + ": " + std::to_string(rec.rows[i].count) + " elements of " + type + " are not " +
                        std::to_string(rec.rows[i].bytes) + " bytes");
  const double ranks = rec.ranks;
  const double factor = rec.op == "allreduce" ? 2.0 * (ranks - 1) / ranks
                        : rec.op == "reduce_scatter" || rec.op == "all_gather" ? (ranks - 1) / ranks
                                                                                : -1.0;  // a newer op: not checked
  for (size_t i = 0; i < rec.rows.size(); ++i) {
    const CommRow& r = rec.rows[i];
    const std::string where = path + ":" + std::to_string(row_lines[i]);
    for (const auto& [time_us, alg, bus, name] : {std::tuple{r.oop_time_us, algbw[i].first, r.oop_busbw_gbs, "out of place"},
                                                  std::tuple{r.ip_time_us, algbw[i].second, r.ip_busbw_gbs, "in place"}}) {
      const double want = time_us > 0 ? static_cast<double>(r.bytes) / (time_us * 1e3) : 0.0;
      if (std::fabs(alg - want) > 1e-4 + want * (1e-3 / std::max(time_us, 1e-3) + 1e-6))
        throw_usage_error(where + ": " + name + " algbw " + fmt("%.4f", alg) + " GB/s is not bytes / time (" + fmt("%.4f", want) + ")");
      if (factor >= 0 && std::fabs(bus - alg * factor) > 2e-4 + 1e-6 * bus)
        throw_usage_error(where + ": " + name + " busbw " + fmt("%.4f", bus) + " GB/s is not algbw x " + fmt("%.4g", factor) + " for " +
                          rec.op + " on " + std::to_string(rec.ranks) + " ranks");
    }
  }
}

}  // namespace

bool is_comm_record_path(const std::string& path) { return path.size() > 5 && path.compare(path.size() - 5, 5, ".comm") == 0; }

CommRecord read_comm_record(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_usage_error(path + ": cannot open the dlperf-comm record");
  CommRecord rec;
  rec.file = path;
  std::string line;
  int n = 0;
  bool magic = false, result = false;
  std::vector<std::pair<double, double>> algbw;  // out of place, in place, per row
  std::vector<int> row_lines;
  uint64_t row_wrong = 0;
  while (std::getline(in, line)) {
    const std::string where = path + ":" + std::to_string(++n);
    if (!line.empty() && line.back() == '\r')
      throw_usage_error(where + ": has Windows (CRLF) line endings; dlperf-comm writes LF only (convert with dos2unix)");
    if (n == 1) {
      if (line != kMagic) throw_usage_error(where + ": not a dlperf-comm record (the first line must be '" + std::string(kMagic) + "')");
      magic = true;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "result") {
      if (result) throw_usage_error(where + ": a second result line (two records joined into one file?)");
      for (std::string kv; words >> kv;) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) throw_usage_error(where + ": '" + kv + "' is not key=value");
        rec.result[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      result = true;
    } else if (kind == "row") {
      std::vector<std::string> f;
      for (std::string w; words >> w;) f.push_back(w);
      if (f.size() != 9) throw_usage_error(where + ": a row has 9 numbers (bytes count oop_us oop_algbw oop_busbw ip_us ip_algbw ip_busbw wrong)");
      const auto bytes = parse_uint64(f[0]);
      if (!bytes) throw_usage_error(where + ": '" + f[0] + "' is not a byte count");
      const auto count = parse_uint64(f[1]);
      if (!count) throw_usage_error(where + ": '" + f[1] + "' is not an element count");
      CommRow r{*bytes, number(where, f[4]), number(where, f[7]), number(where, f[2]), number(where, f[5]), *count};
      if (!rec.rows.empty() && r.bytes <= rec.rows.back().bytes) throw_usage_error(where + ": sizes must ascend");
      const auto wrong = parse_uint64(f[8]);
      if (!wrong) throw_usage_error(where + ": '" + f[8] + "' is not a count of wrong elements");
      rec.rows.push_back(r);
      algbw.push_back({number(where, f[3]), number(where, f[6])});
      row_wrong += *wrong;
      row_lines.push_back(n);
    } else {
      throw_usage_error(where + ": unknown line '" + kind + "' (result, row or # comment)");
    }
  }
  if (!magic) throw_usage_error(path + ": empty, not a dlperf-comm record");
  if (!result) throw_usage_error(path + ": has no result line (written by a dlperf-comm that did not finish?)");
  for (const char* key : {"op", "ranks", "nodes", "status", "backend", "type"})
    if (!rec.result.count(key)) throw_usage_error(path + ": the result line has no " + key + "=");
  const auto ranks = parse_uint64(rec.result["ranks"]), nodes = parse_uint64(rec.result["nodes"]);
  if (!ranks || !nodes || *ranks < 1 || *nodes < 1 || *nodes > *ranks || *ranks > 1000000)
    throw_usage_error(path + ": ranks=" + rec.result["ranks"] + " nodes=" + rec.result["nodes"] + " is not a rank and node count");
  rec.ranks = static_cast<int>(*ranks);
  rec.nodes = static_cast<int>(*nodes);
  rec.op = rec.result.at("op");
  check_consistent(path, rec, algbw, row_lines, row_wrong);
  for (const auto& r : rec.rows) rec.peak_busbw_gbs = std::max({rec.peak_busbw_gbs, r.oop_busbw_gbs, r.ip_busbw_gbs});
  return rec;
}

int write_comm_tables(std::ostream& os, std::vector<CommRecord> records, const LinkRates& links) {
  // Grouped by op (dlperf-comm's order: allreduce, reduce_scatter, all_gather, then any other
  // name a newer dlperf-comm writes), then nodes and ranks: one collective's scaling reads down.
  const auto op_rank = [](const std::string& op) {
    static const std::vector<std::string> order{"allreduce", "reduce_scatter", "all_gather"};
    return static_cast<size_t>(std::find(order.begin(), order.end(), op) - order.begin());
  };
  std::stable_sort(records.begin(), records.end(), [&](const CommRecord& a, const CommRecord& b) {
    return std::tuple(op_rank(a.op), a.op, a.nodes, a.ranks) < std::tuple(op_rank(b.op), b.op, b.nodes, b.ranks);
  });
  std::vector<std::string> warnings;
  os << "\n## Fabric health (dlperf-comm)\n\n"
     << "Bus bandwidth (nccl-tests' busbw, GB/s: algbw x 2(n-1)/n for allreduce, x (n-1)/n for reduce_scatter and\n"
     << "all_gather) per message size from 1 MiB; the link is the profile's expected rate (Gbit/s / 8): within a node\n"
     << "for one-node runs, each rank's share across nodes otherwise.\n";
  std::string op_shown;
  for (const auto& rec : records) {
    if (&rec == &records.front() || rec.op != op_shown) os << "\n### " << rec.op << '\n';
    op_shown = rec.op;
    const bool across = rec.nodes > 1;
    const double link_gbs = (across ? links.inter_gbps : links.intra_gbps) / 8.0;
    const std::string label = std::to_string(rec.nodes) + " node(s) x " + std::to_string(rec.ranks / rec.nodes) + " rank(s) " + rec.op;
    os << "\n#### " << label << ", " << rec.result.at("backend") << ", " << rec.result.at("type") << ": " << rec.file
       << " (status " << rec.result.at("status") << ")\n\n"
       << "| size | busbw out of place | busbw in place | time (us) |" << (link_gbs > 0 ? " % of link |" : "") << '\n'
       << "|---:|---:|---:|---:|" << (link_gbs > 0 ? "---:|" : "") << '\n';
    size_t shown = 0;
    for (const auto& r : rec.rows) {
      if (r.bytes < kBandwidthBytes && &r != &rec.rows.back()) continue;
      ++shown;
      os << "| " << size_text(r.bytes) << " | " << fmt("%.2f", r.oop_busbw_gbs) << " | " << (r.ip_time_us > 0 ? fmt("%.2f", r.ip_busbw_gbs) : "n/a") << " | "
         << fmt("%.1f", r.oop_time_us) << " |";
      if (link_gbs > 0) os << ' ' << fmt("%.0f", 100.0 * std::max(r.oop_busbw_gbs, r.ip_busbw_gbs) / link_gbs) << "% |";
      os << '\n';
    }
    if (shown == 0) os << "| (no sizes) | | | |" << (link_gbs > 0 ? " |" : "") << '\n';
    if (rec.result.at("status") != "PASS")
      warnings.push_back(label + " (" + rec.file + "): status " + rec.result.at("status") +
                         (rec.result.at("status") == "NO_PEERS" ? ": one rank crosses no link" : ": wrong results, the fabric or the library is faulty"));
    else if (link_gbs > 0 && rec.peak_busbw_gbs < links.warn_fraction * link_gbs)
      warnings.push_back(label + " (" + rec.file + "): peak bus bandwidth " + fmt("%.2f", rec.peak_busbw_gbs) + " GB/s is " +
                         fmt("%.0f", 100.0 * rec.peak_busbw_gbs / link_gbs) + "% of the expected " + fmt("%.2f", link_gbs) +
                         " GB/s link, below " + fmt("%.0f", 100.0 * links.warn_fraction) + "%: check the links, NCCL/UCX settings and placement");
  }
  if (links.intra_gbps <= 0 && links.inter_gbps <= 0)
    os << "\nNo expected link rate given (--link-gbps, --intra-gbps; the profile's [fabric]): no comparison.\n";
  for (const auto& w : warnings) os << "\nWARNING: " << w << '\n';
  return static_cast<int>(warnings.size());
}

}  // namespace dlperf::analysis

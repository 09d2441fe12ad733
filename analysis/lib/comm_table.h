// Fabric health beside the training runs (issue 27 item 3): dlperf-comm --output writes one
// text record per measurement (FILE.comm, format in comm/allreduce_bench.h and
// docs/communication.md); dlperf-reduce reads every *.comm among its inputs and prints the
// bus bandwidth per message size against the link rate the cluster should reach, with a
// warning when a measurement's peak falls below a fraction of it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace dlperf::analysis {

struct CommRow {
  uint64_t bytes = 0;
  double oop_busbw_gbs = 0, ip_busbw_gbs = 0;  // GB/s (1e9 bytes), out of place and in place
  double oop_time_us = 0;
  double ip_time_us = 0;  // 0: in place not measured (MPI's reduce-scatter; dlperf-comm prints n/a)
  uint64_t count = 0;     // elements of the record's type (bytes / element size)
};

struct CommRecord {
  std::string file;
  std::map<std::string, std::string> result;  // the result line's key=value fields
  std::vector<CommRow> rows;                  // ascending sizes
  std::string op;  // allreduce, reduce_scatter, all_gather (the result line's op=)
  int ranks = 0, nodes = 0;
  double peak_busbw_gbs = 0;
};

// Expected link rates in Gbit/s (as links are sold; 0 = unknown: no comparison). intra:
// within a node (NVLink, shared memory); inter: each rank's share across nodes (the NIC).
struct LinkRates {
  double intra_gbps = 0, inter_gbps = 0;
  double warn_fraction = 0.8;  // warn when the peak bus bandwidth is below this share of the link
};

bool is_comm_record_path(const std::string& path);  // *.comm
// Throws Error(usage) naming file:line for anything that is not a complete record.
CommRecord read_comm_record(const std::string& path);
// Markdown: one section per op, one table per record in it (nodes, ranks; sizes from 1 MiB up, where bandwidth, not
// latency, is measured), then the warnings. Returns the number of warnings.
int write_comm_tables(std::ostream& os, std::vector<CommRecord> records, const LinkRates& links);

}  // namespace dlperf::analysis

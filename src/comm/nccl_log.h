// Which transport NCCL actually chose (issue 13, item 6), from NCCL's own log: NCCL has no API
// for it, but its INFO log names every connection ("Channel 00/0 : 0[0] -> 1[1] via NET/IB/0")
// and the network it uses ("NET/IB : Using [0]mlx5_0:1/RoCE").
//
// prepare_nccl_log(), called before the process's first NCCL call (NCCL reads its environment
// once), sets NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE to a file of its
// own in $TMPDIR, whatever the user's NCCL_DEBUG (issue 27 item 2: jobs/profiles/generic.ini
// exports NCCL_DEBUG=WARN, which hid the transport). What the user asked NCCL to print is not
// lost: discard_nccl_log() copies the lines of the user's level (WARN: the warnings; INFO or
// TRACE: everything) from that file to standard output, where NCCL prints its log. Only a
// user's own NCCL_DEBUG_FILE with NCCL_DEBUG=INFO or TRACE is left alone and read instead.
// No GPU needed: plain text and environment variables.
#pragma once

#include <iosfwd>
#include <string>

namespace dlperf {

// The log file to read later, or "" when the log cannot be captured. Idempotent.
std::string prepare_nccl_log(const std::string& host);

// The transports in a log, in order of first use, as short names: "P2P", "SHM", "IB", "RoCE"
// (IB verbs over Ethernet), "Socket", "CollNet", or another network plugin's name. "" if none.
std::string parse_nccl_transport(std::istream& log);
std::string nccl_transport_from_file(const std::string& path);
// Copies to `out` the lines the user's NCCL_DEBUG asked for (see above), then removes the log
// prepare_nccl_log() created (not a user's file); NCCL may keep writing to the unlinked file,
// which is harmless.
void discard_nccl_log(std::ostream& out);
void discard_nccl_log();  // to std::cout

}  // namespace dlperf

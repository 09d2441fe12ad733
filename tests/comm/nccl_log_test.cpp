// The transport NCCL chose, read from its INFO log (comm/nccl_log.h): real log lines of NCCL
// 2.18-2.28 in a single node (P2P, SHM), over InfiniBand, RoCE and sockets; and the
// environment dlperf sets up so the log is captured without touching a user's settings.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "comm/nccl_log.h"

namespace dlperf {
namespace {

std::string parse(const std::string& log) {
  std::istringstream in(log);
  return parse_nccl_transport(in);
}

TEST(NcclLog, SingleNodeP2PAndShm) {
  EXPECT_EQ(parse("node1:123:456 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>\n"
                  "node1:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
                  "node1:123:456 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC\n"
                  "node1:123:456 [0] NCCL INFO Channel 02/0 : 1[1] -> 2[2] via SHM/direct/direct\n"),
            "P2P, SHM");
}

TEST(NcclLog, InfiniBandAcrossNodes) {
  EXPECT_EQ(parse("n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n"
                  "n1:1:1 [0] NCCL INFO Using network IB\n"
                  "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                  "n1:1:1 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
                  "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"),
            "P2P, IB");
}

TEST(NcclLog, RoceIsNamedAsSuch) {
  EXPECT_EQ(parse("n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
                  "n1:1:1 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [receive] via NET/IB/0\n"),
            "RoCE");
}

TEST(NcclLog, SocketsAndNothing) {
  EXPECT_EQ(parse("n1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
                  "n1:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n"),
            "Socket");
  EXPECT_EQ(parse("n1:1:1 [0] NCCL INFO cudaDriverVersion 12040\nNCCL version 2.28.9+cuda13.0\n"), "");
  EXPECT_EQ(nccl_transport_from_file("/nonexistent/nccl.log"), "");
  EXPECT_EQ(nccl_transport_from_file(""), "");
}

// Without a user's NCCL_DEBUG, dlperf asks NCCL for its INFO log in a file of its own.
TEST(NcclLog, CapturesTheLogWithoutTouchingStdout) {
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_FILE");
  const std::string path = prepare_nccl_log("hostA");
  EXPECT_NE(path.find("dlperf-nccl.hostA."), std::string::npos) << path;
  EXPECT_STREQ(std::getenv("NCCL_DEBUG"), "INFO");
  EXPECT_STREQ(std::getenv("NCCL_DEBUG_SUBSYS"), "INIT,NET");
  EXPECT_EQ(std::string(std::getenv("NCCL_DEBUG_FILE")), path);
  EXPECT_EQ(prepare_nccl_log("hostB"), path) << "NCCL reads its environment once per process";
}

// Issue 27 item 2: the committed profile exports NCCL_DEBUG=WARN, which switched the record
// off. dlperf captures the INFO log all the same, reads the transport from it, and gives the
// user the warnings they asked for at the end; the private file is removed.
TEST(NcclLog, TheTransportIsReadWhateverTheUsersNcclDebug) {
  setenv("NCCL_DEBUG", "WARN", 1);
  unsetenv("NCCL_DEBUG_FILE");
  const std::string path = prepare_nccl_log("hostC");
  ASSERT_NE(path.find("dlperf-nccl.hostC."), std::string::npos) << path;
  EXPECT_STREQ(std::getenv("NCCL_DEBUG"), "INFO");
  EXPECT_STREQ(std::getenv("NCCL_DEBUG_SUBSYS"), "INIT,NET");
  EXPECT_EQ(std::string(std::getenv("NCCL_DEBUG_FILE")), path);
  {  // what NCCL would write there
    std::ofstream log(path);
    log << "n1:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n"
        << "n1:7:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n"
        << "n1:7:7 [0] NCCL WARN NET/IB : Got completion with error 12\n";
  }
  EXPECT_EQ(nccl_transport_from_file(path), "IB");
  std::ostringstream replay;
  discard_nccl_log(replay);
  EXPECT_EQ(replay.str(), "n1:7:7 [0] NCCL WARN NET/IB : Got completion with error 12\n");
  EXPECT_FALSE(std::ifstream(path).good()) << "the private log is removed";
}

TEST(NcclLog, InfoWithoutAFileIsCapturedAndReplayed) {
  setenv("NCCL_DEBUG", "info", 1);
  unsetenv("NCCL_DEBUG_FILE");
  setenv("NCCL_DEBUG_SUBSYS", "INIT,COLL", 1);
  const std::string path = prepare_nccl_log("hostD");
  EXPECT_EQ(std::string(std::getenv("NCCL_DEBUG_FILE")), path);
  EXPECT_STREQ(std::getenv("NCCL_DEBUG_SUBSYS"), "INIT,COLL") << "the user's subsystems, for the replay";
  std::ofstream(path) << "n1:7:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n";
  std::ostringstream replay;
  discard_nccl_log(replay);
  EXPECT_EQ(replay.str(), "n1:7:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n");
}

TEST(NcclLog, AUsersOwnInfoFileIsReadInPlace) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", "/tmp/mine.%h.log", 1);
  EXPECT_EQ(prepare_nccl_log("hostE"), "/tmp/mine.hostE.log");
  EXPECT_STREQ(std::getenv("NCCL_DEBUG_FILE"), "/tmp/mine.%h.log");
}

}  // namespace
}  // namespace dlperf

// Helpers shared by the trace tests: a fresh temporary directory per test and a small run.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "trace/synthetic_run.h"

namespace dlperf::test {

// A directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "dlperf-trace-XXXXXX").string();
    path_ = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline RunRecord small_run(int64_t world = 2, int64_t iterations = 10, int64_t repeat = 0) {
  SyntheticRunSpec spec;
  spec.info.model = "resnet50";
  spec.info.precision = "fp32";
  spec.info.backend = "cpu";
  spec.info.batch_per_device = 32;
  spec.info.image_size = 224;
  spec.info.nodes = 1;
  spec.info.devices_per_node = world;
  spec.info.world_size = world;
  spec.info.repeat_index = repeat;
  spec.info.warmup = 2;
  spec.info.status = RunStatus::complete;
  spec.iterations = iterations;
  return make_synthetic_run(spec);
}

}  // namespace dlperf::test

// The peak a device could reach, for model-FLOPs utilisation (MFU = achieved model FLOP/s /
// peak; docs/llm.md). In order: --peak-tflops when given; a GPU found in the table of NVIDIA's
// datasheet figures (dense, no sparsity) for the run's precision; on the CPU backend an
// estimate, cores x FLOPs per cycle of the ISA kernels dispatch to x maximum clock.
#pragma once

#include <string>

#include "backend/backend.h"

namespace dlperf {

struct PeakFlops {
  double tflops = 0;   // per device; 0: unknown (no MFU)
  std::string source;  // "--peak-tflops", "NVIDIA H100 SXM datasheet, dense bf16", "estimate: 2 cores x ..."
};

// gpu_model: the device's name ("NVIDIA H100 80GB HBM3"); isa: the CPU ISA ("avx512_core_bf16");
// cores: the cores the rank computes on (its threads, at most its physical cores).
PeakFlops peak_flops(double given_tflops, BackendKind backend, Precision precision, const std::string& gpu_model,
                     const std::string& isa, int cores);

// The CPU's vendor ("GenuineIntel", "AuthenticAMD") and family (/proc/cpuinfo; -1 unknown).
struct CpuFamily {
  std::string vendor;
  int family = -1;
};
CpuFamily this_cpu_family();
// Peak FLOPs per cycle per core of the kernels `isa` dispatches to in `precision` (the table in
// peak_flops.cpp); `why` gets a note when the CPU family halves the ISA's figure.
double cpu_flops_per_cycle(const std::string& isa, Precision precision, const CpuFamily& cpu, std::string* why = nullptr);

// The GPU table alone (tests, docs): dense TFLOP/s for a device name and precision; 0 if unknown.
double gpu_peak_tflops(const std::string& gpu_model, Precision precision, std::string* which = nullptr);

}  // namespace dlperf

// Peak FLOP/s per device for MFU (see peak_flops.h).
//
// GPUs: NVIDIA's datasheet figures, dense (the datasheets' headline tensor-core numbers are
// "with sparsity", twice these). TF32 and FP8 are tensor-core rates; "fp32" is IEEE fp32 on the
// CUDA cores (dlperf's fp32 precision allows no TF32). fp16 = bf16 on every listed GPU.
//   device               fp32   tf32    bf16/fp16   fp8     source
//   H100 SXM5             67    494.7    989.4     1978.9   H100 datasheet (SXM5)
//   H100 PCIe             51    378      756       1513     H100 datasheet (PCIe)
//   H200 (SXM)            67    494.7    989.4     1978.9   H200 datasheet (same GH100 rates as H100 SXM)
//   A100 (SXM, PCIe)      19.5  156      312       -        A100 datasheet
//   H100 NVL, H200 NVL    60    417.5    835.5     1670.5   H100 / H200 datasheets (NVL column: sparse / 2)
//   B200 (HGX)            80    1100     2250      4500     HGX B200 datasheet, per GPU, sparse / 2
//   GB200                 80    1250     2500      5000     GB200 NVL72 datasheet, per GPU, sparse / 2
// CPUs: cores x FLOPs per cycle per core x maximum clock (cpuinfo_max_freq, else /proc/cpuinfo):
//   fp32 on AVX-512 (avx512_core*): 2 FMA units x 16 lanes x 2 = 64; AVX2: 32
//   bf16 on AVX512-BF16 (vdpbf16ps): 2 x 32 x 2 = 128; on AMX (avx512_core_amx): 1,024 (Intel's
//   figure per core per cycle for AMX-BF16)
//   AMD Zen 4 (family 25 with AVX-512) runs 512-bit operations on 256-bit units, two passes
//   each: half of the above (32 fp32, 64 bf16); Zen 5 (family 26) has full 512-bit units.
// cores: the rank's compute threads, at most the physical cores it may run on (SMT siblings
// share their core's FMA units).
// An estimate: a core sustaining a lower all-core clock, or a CPU with one 512-bit FMA unit,
// reaches less; the source line says which figures were used.
#include "train/measure/peak_flops.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace dlperf {
namespace {

struct GpuRow {
  const char* name;     // matched in the device name
  const char* needs;    // a second substring that must also match, or ""
  const char* label;
  double fp32, tf32, bf16, fp8;
};
// Checked in order: the NVL and PCIe cards before the SXM parts whose names they contain, GB200
// before B200.
constexpr GpuRow kGpus[] = {
    {"H200", "NVL", "NVIDIA H200 NVL", 60.0, 417.5, 835.5, 1670.5},
    {"H200", "", "NVIDIA H200", 67.0, 494.7, 989.4, 1978.9},
    {"H100", "NVL", "NVIDIA H100 NVL", 60.0, 417.5, 835.5, 1670.5},
    {"H100", "PCIe", "NVIDIA H100 PCIe", 51.0, 378.0, 756.0, 1513.0},
    {"H100", "", "NVIDIA H100 SXM", 67.0, 494.7, 989.4, 1978.9},
    {"A100", "", "NVIDIA A100", 19.5, 156.0, 312.0, 0.0},
    {"GB200", "", "NVIDIA GB200", 80.0, 1250.0, 2500.0, 5000.0},
    {"B200", "", "NVIDIA B200", 80.0, 1100.0, 2250.0, 4500.0},
};

double max_clock_ghz() {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (f >> khz && khz > 0) return khz / 1e6;
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("cpu MHz", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return std::stod(line.substr(colon + 1)) / 1e3;
    }
  return 0;
}

}  // namespace

double gpu_peak_tflops(const std::string& gpu_model, Precision precision, std::string* which) {
  for (const GpuRow& g : kGpus) {
    if (gpu_model.find(g.name) == std::string::npos || (*g.needs && gpu_model.find(g.needs) == std::string::npos)) continue;
    if (which) *which = g.label;
    switch (precision) {
      case Precision::fp32: return g.fp32;
      case Precision::tf32: return g.tf32;
      case Precision::bf16:
      case Precision::fp16: return g.bf16;
    }
  }
  return 0;
}

PeakFlops peak_flops(double given_tflops, BackendKind backend, Precision precision, const std::string& gpu_model,
                     const std::string& isa, int cores) {
  if (given_tflops > 0) return {given_tflops, "--peak-tflops"};
  if (backend == BackendKind::cuda) {
    std::string which;
    const double t = gpu_peak_tflops(gpu_model, precision, &which);
    if (t > 0) return {t, which + " datasheet, dense " + to_string(precision)};
    return {0, "unknown GPU '" + gpu_model + "': give --peak-tflops"};
  }
  std::string why;
  const double per_cycle = cpu_flops_per_cycle(isa, precision, this_cpu_family(), &why);
  const double ghz = max_clock_ghz();
  if (ghz <= 0) return {0, "unknown CPU clock: give --peak-tflops"};
  char buf[224];
  std::snprintf(buf, sizeof buf, "estimate: %d cores x %.0f %s FLOP/cycle (%s%s) x %.2f GHz", cores, per_cycle, to_string(precision),
                isa.c_str(), why.c_str(), ghz);
  return {cores * per_cycle * ghz / 1e3, buf};
}

CpuFamily this_cpu_family() {
  CpuFamily f;
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line) && (f.vendor.empty() || f.family < 0);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (line.rfind("vendor_id", 0) == 0) f.vendor = value;
    else if (line.rfind("cpu family", 0) == 0) f.family = std::atoi(value.c_str());
  }
  return f;
}

double cpu_flops_per_cycle(const std::string& isa, Precision precision, const CpuFamily& cpu, std::string* why) {
  const bool avx512 = isa.rfind("avx512", 0) == 0, amx = isa.find("amx") != std::string::npos;
  double per_cycle = avx512 ? 64 : 32;
  if (precision == Precision::bf16) per_cycle = amx ? 1024 : 128;
  // Zen 4 is AMD's only family with AVX-512 on 256-bit units (Zen 3, also family 25, has none).
  if (avx512 && !amx && cpu.vendor == "AuthenticAMD" && cpu.family == 25) {
    per_cycle /= 2;
    if (why) *why = ", Zen 4: 512-bit operations on 256-bit units";
  }
  return per_cycle;
}

}  // namespace dlperf

// The step gate update (backend/step_gate.h) on the device: one thread reads the gradients'
// sum of squares (computed before it on the same stream by launch_sum_squares) and the gate,
// and writes the skip decision, the gradient multiplier and the new loss scale. No value
// leaves the device; the optimizer kernels read the gate as they run.
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

__global__ void gate_update_kernel(const double* sq_sum, float* gate, GateUpdateParams p) {
  const float used = gate[kGateLossScale];
  const double sq = (p.check_finite || p.clip_norm > 0.0f) ? *sq_sum : 0.0;
  if (p.check_finite && !isfinite(sq)) {  // inf/nan somewhere: skip, retry with half the scale
    gate[kGateSkip] = 1.0f;
    gate[kGateLossScale] = used * 0.5f;
    gate[kGateGoodSteps] = 0.0f;
    gate[kGateSkipped] += 1.0f;
    return;
  }
  gate[kGateSkip] = 0.0f;
  gate[kGateApplied] += 1.0f;
  double m = static_cast<double>(p.grad_scale) / static_cast<double>(used);
  if (p.clip_norm > 0.0f) {  // torch.nn.utils.clip_grad_norm_: coefficient max / (norm + 1e-6) when above max
    const double norm = sqrt(sq) * m;
    gate[kGateGradNorm] = static_cast<float>(norm);
    if (norm > p.clip_norm) m *= p.clip_norm / (norm + 1e-6);
  }
  gate[kGateGradScale] = static_cast<float>(m);
  if (p.check_finite) {
    gate[kGateGoodSteps] += 1.0f;
    if (gate[kGateGoodSteps] >= static_cast<float>(p.growth_interval)) {
      gate[kGateLossScale] = used * 2.0f;
      gate[kGateGoodSteps] = 0.0f;
    }
  }
}

}  // namespace

cudaError_t launch_gate_update(const double* sq_sum, float* gate, GateUpdateParams p, cudaStream_t s) {
  gate_update_kernel<<<1, 1, 0, s>>>(sq_sum, gate, p);
  return launched();
}

void list_kernels_step_gate(std::vector<KernelLaunch>& out) { out.push_back(launch_entry("gate_update_kernel", &gate_update_kernel, 1)); }

}  // namespace dlperf::cuda

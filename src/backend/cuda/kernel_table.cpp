// The launch table of every CUDA backend kernel (kernels.h: KernelLaunch), joined from the
// lists each .cu file keeps beside its launchers. kernel_limits_test checks it on the GPU.
#include "backend/cuda/kernels.h"

namespace dlperf::cuda {

std::vector<KernelLaunch> kernel_launches() {
  std::vector<KernelLaunch> out;
  list_kernels_attention_gemm(out);
  list_kernels_batch_norm(out);
  list_kernels_convert(out);
  list_kernels_cross_entropy(out);
  list_kernels_eltwise(out);
  list_kernels_embedding(out);
  list_kernels_layer_norm(out);
  list_kernels_llama(out);
  list_kernels_masked_softmax(out);
  list_kernels_optimizer(out);
  list_kernels_pooling(out);
  list_kernels_step_gate(out);
  return out;
}

}  // namespace dlperf::cuda

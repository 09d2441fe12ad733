// Bounds on the sizes dlperf-train is asked for, checked before anything is allocated, so an
// image or sequence size no backend can hold is a one-line error naming the flag rather than
// a failed allocation deep inside oneDNN or cuDNN.
//   * Per tensor: the backends index some tensors with 32-bit integers (cuDNN's Nd tensor
//     descriptors take int dimensions and strides; oneDNN's reference kernels likewise), so
//     the largest activation of the model must stay under 2^31 elements.
//   * Per rank: a lower bound on the activation memory (the first layers' outputs, which
//     training must keep for backward) must fit the memory there is. A lower bound never
//     refuses a run that would fit; it catches sizes that cannot.
#pragma once

#include <string>

#include <cstdint>

#include "train/options.h"

namespace dlperf {

// Elements of the model's largest activation tensor on one rank (double: the product of
// absurd sizes overflows int64).
double largest_activation_elements(const TrainOptions& o);
// Bytes one rank must at least hold for activations.
double min_activation_bytes(const TrainOptions& o);

// Throws Error(usage) naming --image-size / --seq-len / --batch-size when a tensor would
// pass 2^31 elements, or (memory_bytes > 0) the activations cannot fit `memory_bytes`.
void check_activation_sizes(const TrainOptions& o, double memory_bytes);

// The memory this process may use, in bytes: the machine's physical memory, or less where a
// cgroup this process is in limits it (Slurm's ConstrainRAMSpace, a container); 0 when unknown.
double physical_memory_bytes();
// The tightest memory limit of the cgroups named in `self` (/proc/self/cgroup's text) and every
// group above them, read under `root` (/sys/fs/cgroup): cgroup v2's memory.max, v1's
// memory.limit_in_bytes (the memory controller's hierarchy); 0 when none is set.
double cgroup_memory_limit_bytes(const std::string& root, const std::string& self);

}  // namespace dlperf

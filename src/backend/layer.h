// Parameters and the Layer base class.
//
// Every parameter lives in two flat f32 buffers owned by the trainer: master values and
// gradients (and the optimizer's state beside them). A layer declares its parameters at plan
// time (ParamSpec), is then bound to its slices (ParamSlot), and from then on reads its
// weights from and writes its gradients into those slices. Contiguous slices are what make
// gradient buckets and fused optimizer updates possible.
//
// A backend may keep a parameter in a blocked layout (oneDNN OIhw16i16o): storage_elems
// counts the f32 elements it occupies, padding included; padded elements stay zero.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backend/tensor.h"

namespace dlperf {

enum class ParamRole : uint8_t { weight, bias, norm_scale, norm_shift, embedding };
// Weight decay applies to weights and embeddings, never to biases or normalisation parameters.
inline bool decays(ParamRole r) { return r == ParamRole::weight || r == ParamRole::embedding; }

struct ParamSpec {
  std::string name;          // PyTorch-style name, "layer1.0.conv1.weight"
  Dims dims;                 // canonical shape, e.g. (Cout, Cin, KH, KW)
  ParamRole role = ParamRole::weight;
  size_t storage_elems = 0;  // f32 elements in the flat buffers
};

struct ParamSlot {
  float* value = nullptr;  // storage_elems master values (f32, backend layout)
  float* grad = nullptr;   // storage_elems gradients, same layout
};

class Layer {
 public:
  virtual ~Layer() = default;
  const std::vector<ParamSpec>& params() const { return params_; }

  // Once, after the flat buffers exist; slots[i] belongs to params()[i].
  virtual void bind(std::span<const ParamSlot> slots) { (void)slots; }
  // Moves a parameter or gradient between its storage layout and the canonical one.
  virtual void write_param(size_t i, std::span<const float> canonical) { (void)i, (void)canonical; }
  virtual void read_param(size_t i, std::span<float> canonical) const { (void)i, (void)canonical; }
  virtual void read_grad(size_t i, std::span<float> canonical) const { (void)i, (void)canonical; }
  // Low-precision runs: refresh the compute copy (bf16/fp16) of the weights from the f32
  // master values. Called once per step before forward; a no-op in fp32.
  virtual void refresh_compute_weights() {}

 protected:
  std::vector<ParamSpec>& params_specs() { return params_; }

 private:
  std::vector<ParamSpec> params_;
};

}  // namespace dlperf

// VGG16 (configuration D) written once above the op interface.
//
//   images (N, 3, S, S)
//   block 1: features.0, .2   3x3 conv W  + ReLU, max pool 2x2        (N, W,  S/2,  S/2)
//   block 2: features.5, .7   3x3 conv 2W + ReLU, max pool            (N, 2W, S/4,  S/4)
//   block 3: features.10..14  3x3 conv 4W + ReLU (x3), max pool       (N, 4W, S/8,  S/8)
//   block 4: features.17..21  3x3 conv 8W + ReLU (x3), max pool       (N, 8W, S/16, S/16)
//   block 5: features.24..28  3x3 conv 8W + ReLU (x3), max pool       (N, 8W, S/32, S/32)
//   flatten in (C, H, W) order                                        (N, 8W * (S/32)^2)
//   classifier.0 -> ReLU -> dropout -> classifier.3 -> ReLU -> dropout -> classifier.6
//   softmax cross-entropy
//
// torchvision's AdaptiveAvgPool2d((7, 7)) before the flatten is the identity at 224x224 (the
// map is already 7x7) and is left out; at other sizes the classifier takes the map as it is.
//
// The features' ReLUs are fused into their convolutions (Conv2dSpec::fuse_relu: one fused kernel
// on cuDNN where an engine offers it, a post-op on oneDNN); the classifier's run in place on
// their linear's output. Either way a layer keeps one tensor, and backward masks with that
// output: relu'(x) = [x > 0] = [relu(x) > 0], the same mask PyTorch's in-place ReLU uses.
#include "models/vgg.h"

#include "core/error.h"
#include "models/init.h"

namespace dlperf {
namespace {

// Configuration D: output channels as multiples of the width, 0 = max pool 2x2.
constexpr int kCfgD[] = {1, 1, 0, 2, 2, 0, 4, 4, 4, 0, 8, 8, 8, 0, 8, 8, 8, 0};

struct ConvLayer {
  std::unique_ptr<Conv2d> conv;  // with its ReLU fused
  TensorPtr out;                 // relu(conv(x) + b)
};

// One stage of the feature extractor: a convolution with its ReLU, or a max pool.
struct Stage {
  std::unique_ptr<ConvLayer> conv;  // null for a pool
  std::unique_ptr<Pool2d> pool;
  TensorPtr pool_out;
  const Tensor& out() const { return conv ? *conv->out : *pool_out; }
};

void check(const VggConfig& c) {
  if (c.batch <= 0) throw_usage_error("--batch-size must be at least 1");
  if (c.image_size < kVggMinImageSize || c.image_size % 32 != 0)
    throw_usage_error("--image-size " + std::to_string(c.image_size) + " does not suit VGG's five 2x2 pools: use a multiple of 32");
  if (c.width <= 0 || c.hidden <= 0 || c.classes <= 0) throw_usage_error("VGG widths, hidden size and classes must be positive");
  if (!(c.dropout >= 0.0f && c.dropout < 1.0f)) throw_usage_error("--dropout must be in [0, 1)");
}

class Vgg final : public Model {
 public:
  Vgg(Backend& be, const VggConfig& c) : be_(be), cfg_(c), cache_(be) {
    check(c);
    const DType t = be.dtype();
    images_ = be.tensor({c.batch, 3, c.image_size, c.image_size}, DType::f32);
    labels_ = be.tensor({c.batch}, DType::s32);
    // Images in the compute dtype and the layout the backend's fast convolutions want from the
    // first layer on (NHWC for AMX / tensor cores; CUDA: channels-last in every precision).
    const Layout layout = be.image_layout();
    x_ = t == DType::f32 && layout == Layout::canonical ? nullptr : be.tensor(images_->dims(), t, layout);
    const Tensor* cur = &input();
    int64_t channels = 3, index = 0;  // index: torchvision's position in nn.Sequential
    for (int v : kCfgD) {
      auto s = std::make_unique<Stage>();
      if (v == 0) {
        s->pool = be.pool2d({PoolKind::max, 2, 2, 0}, *cur);
        s->pool_out = s->pool->make_output();
        index += 1;
      } else {
        const int64_t out_c = v * c.width;
        s->conv = std::make_unique<ConvLayer>();
        s->conv->conv = be.conv2d({"features." + std::to_string(index), channels, out_c, 3, 1, 1, true, index > 0, true}, *cur);
        s->conv->out = s->conv->conv->make_output();
        channels = out_c;
        index += 2;
      }
      stages_.push_back(std::move(s));
      cur = &stages_.back()->out();
    }
    // Flatten: the last map in plain (N, C, H, W) order viewed as (N, C*H*W), whatever layout
    // the pool wrote (Backend::convert reshapes in canonical order).
    const Dims& map = cur->dims();  // (N, C, H, W)
    flat_ = be.tensor({c.batch, map[1] * map[2] * map[3]}, t);
    if (x_) be.plan_convert(*images_, *x_);
    be.plan_convert(*cur, *flat_);   // flatten, and its gradient back
    be.plan_convert(*flat_, *cur);
    fc0_ = be.linear({"classifier.0", flat_->dims()[1], c.hidden, true}, *flat_);
    h0_ = fc0_->make_output();
    relu0_ = be.activation(ActivationKind::relu, *h0_);
    drop0_ = be.dropout(c.dropout, *h0_);
    d0_ = be.tensor_like(*h0_);
    fc3_ = be.linear({"classifier.3", c.hidden, c.hidden, true}, *d0_);
    h3_ = fc3_->make_output();
    relu3_ = be.activation(ActivationKind::relu, *h3_);
    drop3_ = be.dropout(c.dropout, *h3_);
    d3_ = be.tensor_like(*h3_);
    fc6_ = be.linear({"classifier.6", c.hidden, c.classes, true}, *d3_);
    logits_ = fc6_->make_output();
    xent_ = be.cross_entropy({c.classes, c.label_smoothing, -1}, *logits_);
    reserve_gradients();
  }

  std::string name() const override { return "vgg16"; }
  int64_t samples_per_step() const override { return cfg_.batch; }

  std::vector<Layer*> layers() override {
    std::vector<Layer*> v;
    for (auto& s : stages_)
      if (s->conv) v.push_back(s->conv->conv.get());
    for (Layer* l : {fc0_.get(), fc3_.get(), fc6_.get()}) v.push_back(l);
    return v;
  }

  // Images come either raw, already in the input tensor's dtype and layout (the image
  // loader), or as canonical f32 converted by prepare_inputs; either way the step's input is
  // ready after the data phase, so the conversion counts as data time, not forward time.
  std::vector<Tensor*> inputs() override { return {images_.get(), labels_.get()}; }
  void load_into(const HostBatch& batch, std::span<Tensor* const> dst) override {
    DLPERF_ASSERT(!batch.raw.contains("images"), "raw images go through load(), into the model's own tensors");
    dst[0]->write(batch.floats.at("images"));        // (N, 3, S, S) f32
    dst[1]->write_indices(batch.ints.at("labels"));  // (N) s32
  }
  void prepare_inputs() override {
    if (x_) be_.convert(*images_, *x_);
  }
  void load(const HostBatch& batch) override {
    if (auto raw = batch.raw.find("images"); raw != batch.raw.end()) {
      DLPERF_ASSERT(raw->second.spec == *raw_input("images"), "raw images in the model's input format");
      (x_ ? *x_ : *images_).write_bytes(raw->second.data, raw->second.bytes);
      labels_->write_indices(batch.ints.at("labels"));
    } else {
      Model::load(batch);
    }
  }

  std::optional<InputSpec> raw_input(const std::string& name) const override {
    if (name != "images") return std::nullopt;
    return InputSpec{input().dims(), input().dtype(), x_ ? Layout::channels_last : Layout::canonical};
  }

  void forward() override {
    const Tensor* cur = &input();
    for (auto& s : stages_) {
      if (s->conv) {
        reading(*s->conv->conv);
        s->conv->conv->forward(*cur, *s->conv->out);
      } else {
        s->pool->forward(*cur, *s->pool_out);
      }
      cur = &s->out();
    }
    be_.convert(*cur, *flat_);
    const uint64_t seed = cfg_.dropout_seed;
    reading(*fc0_);
    fc0_->forward(*flat_, *h0_);
    relu0_->forward(*h0_, *h0_);
    drop0_->forward(*h0_, *d0_, seed);
    reading(*fc3_);
    fc3_->forward(*d0_, *h3_);
    relu3_->forward(*h3_, *h3_);
    drop3_->forward(*h3_, *d3_, seed + 1);
    reading(*fc6_);
    fc6_->forward(*d3_, *logits_);
    xent_->forward(*logits_, *labels_);
  }

  float loss() override { return xent_->loss(); }
  std::vector<const float*> loss_terms() override { return {xent_->loss_location()}; }

  // Backward's gradient buffers, allocated with the model (the memory plan counts them, and a
  // batch that cannot fit fails before its first step): the ones backward asks the cache for.
  void reserve_gradients() {
    for (const auto& [role, t] : {std::pair{"d_logits", logits_.get()}, {"d_hidden", d3_.get()}, {"d_hidden0", d0_.get()}, {"d_flat", flat_.get()}})
      cache_.like(role, *t);
    const Tensor* dy = &cache_.like("d_io0", stages_.back()->out());
    for (size_t i = stages_.size(); i-- > 1;) dy = &stage_dx(i, *dy);
  }
  // A stage's input gradient: gradients alternate between two buffers per shape, a stage reads
  // dy while writing dx.
  Tensor& stage_dx(size_t i, const Tensor& dy) {
    const Tensor& x = stages_[i - 1]->out();
    return cache_.like(&dy == &cache_.like("d_io0", stages_[i]->out()) ? "d_io1" : "d_io0", x);
  }

  void backward(const LossGradScale& loss_scale, const GradReadyFn& ready) override {
    Tensor& dlogits = cache_.like("d_logits", *logits_);
    xent_->backward(dlogits, loss_scale);
    Tensor& dh = cache_.like("d_hidden", *d3_);
    writing(*fc6_);
    fc6_->backward(*d3_, dlogits, &dh);
    ready(*fc6_);
    drop3_->backward(dh, dh);
    relu3_->backward(*h3_, dh, dh);  // h3 holds relu's output (see the top of the file)
    Tensor& dh0 = cache_.like("d_hidden0", *d0_);
    writing(*fc3_);
    fc3_->backward(*d0_, dh, &dh0);
    ready(*fc3_);
    drop0_->backward(dh0, dh0);
    relu0_->backward(*h0_, dh0, dh0);
    Tensor& dflat = cache_.like("d_flat", *flat_);
    writing(*fc0_);
    fc0_->backward(*flat_, dh0, &dflat);
    ready(*fc0_);
    // Features (stage_dx). Each convolution applies its fused ReLU's mask itself.
    Tensor* dy = &cache_.like("d_io0", stages_.back()->out());
    be_.convert(dflat, *dy);
    for (size_t i = stages_.size(); i-- > 0;) {
      Stage& s = *stages_[i];
      const Tensor& x = i > 0 ? stages_[i - 1]->out() : input();
      Tensor* dx = nullptr;  // the images need no gradient
      if (i > 0) {
        dx = &stage_dx(i, *dy);
        DLPERF_ASSERT(dx->same_layout(x), "gradient scratch in the layout of its activation");
      }
      if (s.conv) {
        writing(*s.conv->conv);
        s.conv->conv->backward(x, *dy, dx);
        ready(*s.conv->conv);
      } else {
        s.pool->backward(*dy, *dx);
      }
      dy = dx;
    }
  }

  // torchvision's VGG initialisation: convolutions kaiming_normal_(fan_out, relu) with zero
  // bias; linear layers N(0, 0.01) with zero bias.
  void init_params(uint64_t seed) override {
    Rng rng(seed);
    for (Layer* l : layers()) {
      for (size_t i = 0; i < l->params().size(); ++i) {
        const ParamSpec& p = l->params()[i];
        std::vector<float> v(static_cast<size_t>(product(p.dims)));
        if (p.role == ParamRole::bias) {
          fill(v, 0.0f);
        } else if (p.dims.size() == 4) {  // (Cout, Cin, 3, 3)
          kaiming_normal_fan_out(v, p.dims[0] * p.dims[2] * p.dims[3], rng);
        } else {  // (out, in)
          normal_init(v, 0.01f, rng);
        }
        l->write_param(i, v);
      }
    }
  }

 private:
  const Tensor& input() const { return x_ ? *x_ : *images_; }

  Backend& be_;
  VggConfig cfg_;
  TensorCache cache_;
  TensorPtr images_, labels_, x_;  // x_: images in the compute dtype and preferred layout (null: images_ as they are)
  std::vector<std::unique_ptr<Stage>> stages_;
  std::unique_ptr<Linear> fc0_, fc3_, fc6_;
  std::unique_ptr<Activation> relu0_, relu3_;
  std::unique_ptr<Dropout> drop0_, drop3_;
  std::unique_ptr<SoftmaxCrossEntropy> xent_;
  TensorPtr flat_;    // (N, C*H*W) plain: the classifier's input
  TensorPtr h0_, d0_; // (N, hidden): relu(classifier.0), then dropout
  TensorPtr h3_, d3_; // (N, hidden): relu(classifier.3), then dropout
  TensorPtr logits_;  // (N, classes)
};

}  // namespace

std::unique_ptr<Model> make_vgg(Backend& be, const VggConfig& config) { return std::make_unique<Vgg>(be, config); }

namespace {
int64_t vgg_count(const VggConfig& c, bool biases) {
  const int64_t bias = biases ? 1 : 0;
  int64_t n = 0, in = 3;
  for (int v : kCfgD) {
    if (v == 0) continue;
    const int64_t out = v * c.width;
    n += out * in * 9 + bias * out;
    in = out;
  }
  const int64_t side = c.image_size / 32;
  const int64_t flat = in * side * side;
  return n + flat * c.hidden + c.hidden * c.hidden + c.hidden * c.classes + bias * (2 * c.hidden + c.classes);
}
}  // namespace

int64_t vgg_parameter_count(const VggConfig& c) { return vgg_count(c, true); }
int64_t vgg_matrix_count(const VggConfig& c) { return vgg_count(c, false); }

}  // namespace dlperf

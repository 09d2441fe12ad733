// ResNet v1.5 written once above the op interface.
//
//   images (N, 3, S, S)
//   conv1 7x7/2 -> bn1+relu -> maxpool 3x3/2                       (N, W, S/4, S/4)
//   layer1..4: bottlenecks, planes W, 2W, 4W, 8W, expansion 4; the first block of
//              layer2..4 has stride 2 on its 3x3 conv and a 1x1/2 downsample shortcut
//   global average pool (N, 32W) -> fc (N, classes) -> softmax cross-entropy
//
// Bottleneck: x -> conv1 1x1 -> bn1+relu -> conv2 3x3/s -> bn2+relu -> conv3 1x1
//             -> bn3 + shortcut + relu -> out  (one fused op: BatchNormSpec::residual)
//             shortcut: x, or downsample conv 1x1/s -> bn
#include "models/resnet.h"

#include <cmath>

#include "core/error.h"
#include "models/init.h"

namespace dlperf {
namespace {

constexpr int64_t kExpansion = 4;

struct Bottleneck {
  std::unique_ptr<Conv2d> conv1, conv2, conv3, ds_conv;
  std::unique_ptr<BatchNorm> bn1, bn2, bn3, ds_bn;  // bn3: out = relu(bn3(a3) + shortcut)
  std::unique_ptr<Add> grad_add;  // dx += d (identity shortcut), d in the shortcut's layout
  std::unique_ptr<Add> ds_add;    // dx += downsample's dx, both in x's layout
  // Inner activations, read by backward (--recompute block: shared, see ActivationStore).
  Tensor *a1 = nullptr, *b1 = nullptr, *a2 = nullptr, *b2 = nullptr, *a3 = nullptr, *ds_a = nullptr, *ds_b = nullptr;
  ActivationStore acts;
  TensorPtr out;  // always the block's own: the next block's input

  Bottleneck(Backend& be, const std::string& name, const Tensor& x, int64_t planes, int64_t stride, TensorCache* shared)
      : acts(shared) {
    const int64_t in_c = x.dims()[1], out_c = planes * kExpansion;
    const auto keep = [&](TensorPtr t, const char* role) { return acts.keep(std::move(t), role); };
    conv1 = be.conv2d({name + ".conv1", in_c, planes, 1, 1, 0}, x);
    a1 = keep(conv1->make_output(), "a1");
    bn1 = be.batch_norm({name + ".bn1", planes, 1e-5f, 0.1f, true}, *a1);
    b1 = keep(bn1->make_output(), "b1");
    conv2 = be.conv2d({name + ".conv2", planes, planes, 3, stride, 1}, *b1);
    a2 = keep(conv2->make_output(), "a2");
    bn2 = be.batch_norm({name + ".bn2", planes, 1e-5f, 0.1f, true}, *a2);
    b2 = keep(bn2->make_output(), "b2");
    conv3 = be.conv2d({name + ".conv3", planes, out_c, 1, 1, 0}, *b2);
    a3 = keep(conv3->make_output(), "a3");
    if (stride != 1 || in_c != out_c) {
      ds_conv = be.conv2d({name + ".downsample.0", in_c, out_c, 1, stride, 0}, x);
      ds_a = keep(ds_conv->make_output(), "ds_a");
      ds_bn = be.batch_norm({name + ".downsample.1", out_c, 1e-5f, 0.1f, false}, *ds_a);
      ds_b = keep(ds_bn->make_output(), "ds_b");
    }
    const Tensor& shortcut = ds_conv ? *ds_b : x;
    bn3 = be.batch_norm({name + ".bn3", out_c, 1e-5f, 0.1f, true, &shortcut}, *a3);
    out = bn3->make_output();
    // Branches may differ in layout (oneDNN picks per convolution): the shortcut's gradient
    // comes in the shortcut's layout, and is converted where the downsample branch needs another.
    if (ds_conv) {
      ds_add = be.add(x, x, false);
    } else {
      grad_add = be.add(x, x, false);
    }
  }

  // Layers with parameters in forward order (the reverse is the order backward finishes them).
  void collect(std::vector<Layer*>& v) {
    for (Layer* l : {static_cast<Layer*>(conv1.get()), static_cast<Layer*>(bn1.get()), static_cast<Layer*>(conv2.get()),
                     static_cast<Layer*>(bn2.get()), static_cast<Layer*>(conv3.get()), static_cast<Layer*>(bn3.get())})
      v.push_back(l);
    if (ds_conv) {
      v.push_back(ds_conv.get());
      v.push_back(ds_bn.get());
    }
  }

  void forward(const Tensor& x) {
    conv1->forward(x, *a1);
    bn1->forward(*a1, *b1);
    conv2->forward(*b1, *a2);
    bn2->forward(*a2, *b2);
    conv3->forward(*b2, *a3);
    if (ds_conv) {
      ds_conv->forward(x, *ds_a);
      ds_bn->forward(*ds_a, *ds_b);
    }
    bn3->forward_add(*a3, ds_conv ? *ds_b : x, *out);
  }

  // --recompute block: forward again from the kept input, just before backward. The same
  // kernels on the same inputs give the same bits (out is rewritten with its own values); the
  // batch norms' running statistics were already updated by the first forward.
  void recompute(const Tensor& x) {
    std::vector<BatchNorm*> bns{bn1.get(), bn2.get(), bn3.get()};
    if (ds_bn) bns.push_back(ds_bn.get());
    for (BatchNorm* bn : bns) bn->set_running_stats_update(false);
    forward(x);
    for (BatchNorm* bn : bns) bn->set_running_stats_update(true);
  }

  // The gradient scratch of backward, from `cache` (shared with the other blocks of the same
  // shapes): asked for at build time too, so it is allocated with the model.
  struct Grads {
    Tensor *d, *d_a3, *d_dsa = nullptr, *d_short = nullptr, *d_b2, *d_a2, *d_b1, *d_a1;
  };
  Grads grads(const Tensor& x, bool with_dx, TensorCache& cache) const {
    Grads g{};
    // bn3's backward gives both branches their gradient d = relu'(out) dout: d_a3 for its own
    // input, d for the shortcut (in the shortcut's layout).
    g.d = ds_conv ? &cache.like("d_sum_ds", *ds_b) : &cache.like("d_sum", x);
    g.d_a3 = &cache.like("d_a3", *a3);
    if (ds_conv) {
      g.d_dsa = &cache.like("d_ds_a", *ds_a);
      g.d_short = with_dx ? &cache.like("d_ds_x", x) : nullptr;
    }
    g.d_b2 = &cache.like("d_b2", *b2);
    g.d_a2 = &cache.like("d_a2", *a2);
    g.d_b1 = &cache.like("d_b1", *b1);
    g.d_a1 = &cache.like("d_a1", *a1);
    return g;
  }

  // dout: gradient of out; dx: gradient of x (written).
  void backward(const Tensor& x, const Tensor& dout, Tensor* dx, TensorCache& cache, const GradReadyFn& ready) {
    const Grads g = grads(x, dx != nullptr, cache);
    Tensor &d = *g.d, &d_a3 = *g.d_a3, &d_b2 = *g.d_b2, &d_a2 = *g.d_a2, &d_b1 = *g.d_b1, &d_a1 = *g.d_a1;
    bn3->backward_add(*a3, dout, d_a3, d);
    ready(*bn3);
    Tensor* d_short = g.d_short;
    if (ds_conv) {
      ds_bn->backward(*ds_a, d, *g.d_dsa);
      ready(*ds_bn);
      ds_conv->backward(x, *g.d_dsa, d_short);
      ready(*ds_conv);
    }
    conv3->backward(*b2, d_a3, &d_b2);
    ready(*conv3);
    bn2->backward(*a2, d_b2, d_a2);
    ready(*bn2);
    conv2->backward(*b1, d_a2, &d_b1);
    ready(*conv2);
    bn1->backward(*a1, d_b1, d_a1);
    ready(*bn1);
    conv1->backward(x, d_a1, dx);
    ready(*conv1);
    if (dx) {  // the two paths' gradients meet at x
      if (ds_conv) {
        ds_add->forward(*dx, *d_short, *dx);
      } else {
        grad_add->forward(*dx, d, *dx);
      }
    }
  }
};

class ResNet final : public Model {
 public:
  ResNet(Backend& be, const ResNetConfig& c) : be_(be), cfg_(c), cache_(be) {
    if (c.batch <= 0) throw_usage_error("--batch-size must be at least 1");
    if (c.image_size < kResNetMinImageSize)
      throw_usage_error("--image-size " + std::to_string(c.image_size) + " is too small for ResNet (stride 32): use " +
                        std::to_string(kResNetMinImageSize) + " or more");
    const DType t = be.dtype();
    images_ = be.tensor({c.batch, 3, c.image_size, c.image_size}, DType::f32);
    labels_ = be.tensor({c.batch}, DType::s32);
    // Images in the compute dtype and the layout the backend's fast convolutions want from the
    // first layer on (NHWC for AMX / tensor cores; CUDA: channels-last in every precision).
    const Layout layout = be.image_layout();
    x_ = t == DType::f32 && layout == Layout::canonical ? nullptr : be.tensor(images_->dims(), t, layout);
    if (x_) be.plan_convert(*images_, *x_);
    const Tensor& x = input();
    conv1_ = be.conv2d({"conv1", 3, c.width, 7, 2, 3, false, false}, x);
    a_ = conv1_->make_output();
    bn1_ = be.batch_norm({"bn1", c.width, 1e-5f, 0.1f, true}, *a_);
    b_ = bn1_->make_output();
    pool_ = be.pool2d({PoolKind::max, 3, 2, 1}, *b_);
    p_ = pool_->make_output();
    const Tensor* cur = p_.get();
    for (int s = 0; s < 4; ++s) {
      const int64_t planes = c.width << s;
      for (int b = 0; b < c.blocks[static_cast<size_t>(s)]; ++b) {
        const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
        const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
        blocks_.push_back(std::make_unique<Bottleneck>(be, name, *cur, planes, stride, c.recompute ? &cache_ : nullptr));
        cur = blocks_.back()->out.get();
      }
    }
    gap_ = be.global_avg_pool(*cur);
    f_ = gap_->make_output();
    fc_ = be.linear({"fc", f_->dims()[1], c.classes, true}, *f_);
    logits_ = fc_->make_output();
    xent_ = be.cross_entropy({c.classes, c.label_smoothing, -1}, *logits_);
    dlogits_ = be.tensor_like(*logits_);
    df_ = be.tensor_like(*f_);
    // Backward's gradient scratch, allocated with the model (the memory plan counts it, and a
    // batch that cannot fit fails before its first step).
    io_grads();
    for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i]->grads(i > 0 ? *blocks_[i - 1]->out : *p_, true, cache_);
    stem_grads();
  }

  // The blocks' output and input gradients, from the last block's dout down to the first
  // block's dx: they alternate between two buffers per shape (a block reads dout while writing
  // dx), a third where the two would coincide.
  std::vector<Tensor*> io_grads() {
    std::vector<Tensor*> io{&cache_.like("d_io0", *blocks_.back()->out)};
    for (size_t i = blocks_.size(); i-- > 0;) {
      const Tensor& x = i > 0 ? *blocks_[i - 1]->out : *p_;
      Tensor* dx = &cache_.like(i % 2 ? "d_io0" : "d_io1", x);
      if (dx == io.back()) dx = &cache_.like("d_io2", x);
      io.push_back(dx);
    }
    return io;
  }
  std::pair<Tensor*, Tensor*> stem_grads() { return {&cache_.like("d_stem_b", *b_), &cache_.like("d_stem_a", *a_)}; }

  std::string name() const override { return "resnet"; }
  int64_t samples_per_step() const override { return cfg_.batch; }

  std::vector<Layer*> layers() override {
    std::vector<Layer*> v{conv1_.get(), bn1_.get()};
    for (auto& b : blocks_) b->collect(v);
    v.push_back(fc_.get());
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
    reading(*conv1_);
    conv1_->forward(input(), *a_);
    reading(*bn1_);
    bn1_->forward(*a_, *b_);
    pool_->forward(*b_, *p_);
    const Tensor* cur = p_.get();
    for (auto& b : blocks_) {
      reading_block(*b);
      b->forward(*cur);
      cur = b->out.get();
    }
    gap_->forward(*cur, *f_);
    reading(*fc_);
    fc_->forward(*f_, *logits_);
    xent_->forward(*logits_, *labels_);
  }

  float loss() override { return xent_->loss(); }
  std::vector<const float*> loss_terms() override { return {xent_->loss_location()}; }

  void backward(const LossGradScale& loss_scale, const GradReadyFn& ready) override {
    xent_->backward(*dlogits_, loss_scale);
    writing(*fc_);
    fc_->backward(*f_, *dlogits_, df_.get());
    ready(*fc_);
    const std::vector<Tensor*> io = io_grads();
    gap_->backward(*df_, *io[0]);
    for (size_t i = blocks_.size(); i-- > 0;) {
      const Tensor& x = i > 0 ? *blocks_[i - 1]->out : *p_;
      // The last block's activations are still in the shared buffers: no other block wrote them since.
      if (cfg_.recompute && i + 1 < blocks_.size()) blocks_[i]->recompute(x);
      writing_block(*blocks_[i]);
      blocks_[i]->backward(x, *io[blocks_.size() - 1 - i], io[blocks_.size() - i], cache_, ready);
    }
    const auto [d_b, d_a] = stem_grads();
    pool_->backward(*io.back(), *d_b);
    writing(*bn1_);
    bn1_->backward(*a_, *d_b, *d_a);
    ready(*bn1_);
    writing(*conv1_);
    conv1_->backward(input(), *d_a, nullptr);
    ready(*conv1_);
  }

  void init_params(uint64_t seed) override {
    Rng rng(seed);
    for (Layer* l : layers()) {
      for (size_t i = 0; i < l->params().size(); ++i) {
        const ParamSpec& p = l->params()[i];
        std::vector<float> v(static_cast<size_t>(product(p.dims)));
        if (p.role == ParamRole::norm_scale) {
          fill(v, 1.0f);
        } else if (p.role == ParamRole::norm_shift) {
          fill(v, 0.0f);
        } else if (p.dims.size() == 4) {  // conv (Cout, Cin, k, k): torchvision's kaiming_normal_(fan_out, relu)
          kaiming_normal_fan_out(v, p.dims[0] * p.dims[2] * p.dims[3], rng);
        } else {  // fc weight (out, in) and bias: nn.Linear's default
          uniform_fan_in(v, fc_->params()[0].dims[1], rng);
        }
        l->write_param(i, v);
      }
    }
  }

 private:
  const Tensor& input() const { return x_ ? *x_ : *images_; }

  Backend& be_;
  ResNetConfig cfg_;
  TensorCache cache_;
  TensorPtr images_, labels_, x_;  // x_: images in the compute dtype and preferred layout (null: images_ as they are)
  std::unique_ptr<Conv2d> conv1_;
  std::unique_ptr<BatchNorm> bn1_;
  std::unique_ptr<Pool2d> pool_;
  std::vector<std::unique_ptr<Bottleneck>> blocks_;
  std::unique_ptr<GlobalAvgPool> gap_;
  std::unique_ptr<Linear> fc_;
  std::unique_ptr<SoftmaxCrossEntropy> xent_;
  TensorPtr a_, b_, p_, f_, logits_, dlogits_, df_;
};

}  // namespace

std::unique_ptr<Model> make_resnet(Backend& be, const ResNetConfig& config) { return std::make_unique<ResNet>(be, config); }

}  // namespace dlperf

#include "train/registry.h"

#include "core/error.h"
#include "models/resnet.h"

namespace dlperf {

std::unique_ptr<Model> make_model(const TrainOptions& o, Backend& be) {
  if (o.model == "resnet50") {
    ResNetConfig rc;
    rc.blocks = o.resnet_blocks;
    rc.width = o.resnet_width;
    rc.classes = o.num_classes;
    rc.batch = o.batch_size;
    rc.image_size = o.image_size;
    rc.label_smoothing = o.label_smoothing;
    return make_resnet(be, rc);
  }
  throw_usage_error("--model '" + o.model + "' is unknown: use resnet50");
}

std::unique_ptr<DataSource> make_data(const TrainOptions& o, int rank) {
  const uint64_t seed = o.seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(rank);
  return std::make_unique<SyntheticImages>(o.batch_size, o.image_size, o.num_classes, seed);
}

std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, Backend& be, ParamStore& store) {
  return std::make_unique<Sgd>(be, store, SgdConfig{o.momentum, o.weight_decay});
}

LrSchedule make_lr_schedule(const TrainOptions& o, int world_size) {
  const float global_batch = static_cast<float>(o.batch_size * world_size);
  return {o.lr_schedule, o.lr * global_batch / 256.0f, o.lr_warmup >= 0 ? o.lr_warmup : o.iterations / 10, o.iterations};
}

std::string model_title(const TrainOptions& o) {
  if (o.model == "resnet50") {
    const bool full = o.resnet_blocks == std::array<int, 4>{3, 4, 6, 3} && o.resnet_width == 64;
    return full ? "ResNet-50 v1.5" : "reduced ResNet v1.5";
  }
  return o.model;
}

}  // namespace dlperf

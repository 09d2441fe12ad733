// The three input stages of input_stage.h.
#include "train/feed/input_stage.h"

#include "core/error.h"

namespace dlperf {

const char* to_string(InputMode m) {
  switch (m) {
    case InputMode::automatic: return "automatic";
    case InputMode::direct: return "direct";
    case InputMode::pipelined: return "pipelined";
    case InputMode::resident: return "resident";
  }
  return "?";
}

namespace {

class DirectInput final : public InputStage {
 public:
  DirectInput(Model& m, DataSource& d) : model_(m), data_(d) {}
  InputMode mode() const override { return InputMode::direct; }
  void prime() override {}
  void deliver() override {
    model_.load(data_.next());
    data_.release();  // the model's tensors hold the batch now
  }
  void prefetch() override {}

 private:
  Model& model_;
  DataSource& data_;
};

class ResidentInput final : public InputStage {
 public:
  ResidentInput(Model& m, DataSource& d) : model_(m), data_(d) {}
  InputMode mode() const override { return InputMode::resident; }
  void prime() override {  // once, before the loop
    model_.load(data_.next());
    data_.release();
  }
  void deliver() override {}
  void prefetch() override {}

 private:
  Model& model_;
  DataSource& data_;
};

class PipelinedInput final : public InputStage {
 public:
  PipelinedInput(Model& m, std::unique_ptr<InputPipe> pipe, DataSource& d) : model_(m), pipe_(std::move(pipe)), data_(d) {}
  InputMode mode() const override { return InputMode::pipelined; }
  void prime() override { prefetch(); }  // the first step's batch
  void deliver() override {
    DLPERF_ASSERT(sent_ > delivered_, "a batch is sent before it is delivered");
    pipe_->deliver();
    model_.prepare_inputs();  // e.g. images into the compute dtype and layout, on the device
    ++delivered_;
  }
  void prefetch() override {
    model_.load_into(data_.next(), pipe_->host_slot());
    data_.release();  // written into the pinned slot
    pipe_->send();
    ++sent_;
  }

 private:
  Model& model_;
  std::unique_ptr<InputPipe> pipe_;
  DataSource& data_;
  int64_t sent_ = 0, delivered_ = 0;
};

}  // namespace

std::unique_ptr<InputStage> make_input_stage(InputMode mode, Model& model, Backend& be, DataSource& data) {
  if (mode == InputMode::resident) return std::make_unique<ResidentInput>(model, data);
  if (mode == InputMode::pipelined && data.raw_batches())
    throw_usage_error("a pipelined input stages canonical batches; the image loader hands over its own format (use the default input)");
  if ((mode == InputMode::automatic && !data.raw_batches()) || mode == InputMode::pipelined) {
    const std::vector<Tensor*> inputs = model.inputs();
    if (auto pipe = be.input_pipe(inputs)) return std::make_unique<PipelinedInput>(model, std::move(pipe), data);
    if (mode == InputMode::pipelined)
      throw_usage_error(std::string("the ") + to_string(be.kind()) + " backend has no copy engine for a pipelined input");
  }
  return std::make_unique<DirectInput>(model, data);
}

}  // namespace dlperf

// Maps validated options to the model, its data source and its optimizer. Adding a model
// means adding it here (and to the --model check in options.cpp); nothing else changes.
#pragma once

#include <memory>

#include "comm/core_pinning.h"
#include "comm/mpi_session.h"
#include "models/model.h"
#include "train/feed/image_data.h"
#include "train/optim/optimizer.h"
#include "train/options.h"
#include "train/feed/synthetic_data.h"

namespace dlperf {

std::unique_ptr<Model> make_model(const TrainOptions& o, Backend& be);
// rank: data differs per rank (each replica sees its own samples), same seed -> same data.
// Generated data, or BERT's pretraining shards (image files: make_image_data).
// world: ranks sharing an indexed token dataset's windows (Llama --data).
std::unique_ptr<DataSource> make_data(const TrainOptions& o, int rank, int world = 1);
// Whether the run reads image files (--data with a CNN).
bool uses_image_files(const TrainOptions& o);
// The image loader of this rank for `input` (the model's raw_input("images")): threads,
// core binding (the rank's cores left over by --threads under --pin-threads) and the
// bad-sample limit from the options.
std::unique_ptr<RealImages> make_image_data(const TrainOptions& o, const WorldInfo& w, std::shared_ptr<const data::Dataset> dataset,
                                            const InputSpec& input, Backend& be);
// The image loader's cores: note_start_cores() records the PUs the process may use before
// --pin-threads binds it (call it first); note_compute_pinning() the PUs the plan gave every
// local rank's compute threads, so each loader takes its share of the rest.
void note_start_cores();
void note_compute_pinning(const PinPlan& plan);
// The loader threads a rank runs: --loader-threads, or the rank's cores not used for compute.
int loader_threads(const TrainOptions& o, const WorldInfo& w);
// What ResNet and VGG take as raw images (their raw_input): NCHW f32 for fp32, NHWC in the
// compute type otherwise. For --loader-only, which builds no model.
InputSpec cnn_image_input(const TrainOptions& o);
// shard: the rank's part under --zero (null: the whole store).
std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, Backend& be, ParamStore& store, const OptimizerShard* shard = nullptr);
// The per-device-batch-256 learning rate scaled to this run's global batch, or as given.
LrSchedule make_lr_schedule(const TrainOptions& o, int world_size);
// One line naming the model for the run banner: "ResNet-50 v1.5".
std::string model_title(const TrainOptions& o);

}  // namespace dlperf

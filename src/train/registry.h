// Maps validated options to the model, its data source and its optimizer. Adding a model
// means adding it here (and to the --model check in options.cpp); nothing else changes.
#pragma once

#include <memory>

#include "models/model.h"
#include "train/optimizer.h"
#include "train/options.h"
#include "train/synthetic_data.h"

namespace dlperf {

std::unique_ptr<Model> make_model(const TrainOptions& o, Backend& be);
// rank: data differs per rank (each replica sees its own samples), same seed -> same data.
std::unique_ptr<DataSource> make_data(const TrainOptions& o, int rank);
std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, Backend& be, ParamStore& store);
// The per-device-batch-256 learning rate scaled to this run's global batch, or as given.
LrSchedule make_lr_schedule(const TrainOptions& o, int world_size);
// One line naming the model for the run banner: "ResNet-50 v1.5".
std::string model_title(const TrainOptions& o);

}  // namespace dlperf

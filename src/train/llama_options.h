// The Llama configuration a run's options ask for: the --model preset, with the reduced sizes
// (--llama-*) and the batch and sequence length applied.
#pragma once

#include "models/llama_config.h"
#include "train/options.h"

namespace dlperf {

LlamaConfig llama_config(const TrainOptions& o);

}  // namespace dlperf

// The Llama configuration a run's options ask for: the --model preset, with the reduced sizes
// (--llama-*) and the batch and sequence length applied.
#pragma once

#include "models/llama_config.h"
#include "train/options.h"

namespace dlperf {

LlamaConfig llama_config(const TrainOptions& o);

// Bytes per logit of the run's output head: 4 where the logits are f32 (fp32; tf32 keeps f32
// tensors), 2 in bf16 and fp16. What --logits-chunk auto, the size limits and the plan weigh.
int64_t llama_logit_bytes(const TrainOptions& o);

}  // namespace dlperf

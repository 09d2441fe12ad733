// BERT pretraining (Devlin et al. 2018; NVIDIA DeepLearningExamples' and HuggingFace's
// BertForPreTraining): embeddings, a post-LN transformer encoder, the masked-LM head with its
// decoder tied to the word embeddings, and the next-sentence head on the pooled first token.
// The defaults are BERT-base (110,106,428 parameters, the tied decoder counted once); tests use
// reduced sizes.
#pragma once

#include <memory>

#include "models/model.h"

namespace dlperf {

struct BertConfig {
  int64_t layers = 12;
  int64_t hidden = 768;
  int64_t heads = 12;
  int64_t intermediate = 3072;
  int64_t vocab = 30522;
  int64_t positions = 512;
  int64_t token_types = 2;
  int64_t batch = 16;             // sequences per device
  int64_t seq_len = 128;
  int64_t max_predictions = 20;   // masked-LM slots per sequence
  float dropout = 0.1f;           // hidden and attention-probability dropout
  float layer_norm_eps = 1e-12f;
  float init_std = 0.02f;         // N(0, std) for weights and embeddings
  uint64_t dropout_seed = 0;
  bool recompute = false;         // --recompute block: layers keep only their input, forward rerun before backward
};

// The host inputs (HostBatch::ints), NVIDIA's pretraining-shard names:
//   input_ids, segment_ids, input_mask   (B * S)   mask: 1 real token, 0 padding
//   masked_lm_positions, masked_lm_ids   (B * P)   position 0 marks an empty slot (not counted)
//   next_sentence_labels                 (B)       0 or 1
inline constexpr const char* kBertInputs[] = {"input_ids",           "segment_ids",   "input_mask",
                                              "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"};

class BertModel : public Model {
 public:
  virtual float mlm_loss() = 0;  // the last forward's two parts of loss()
  virtual float nsp_loss() = 0;
};

// Checks the configuration (usage errors name the flag) and plans every op.
std::unique_ptr<BertModel> make_bert(Backend& be, const BertConfig& config);

// Parameters of a configuration, counted as PyTorch does (tied decoder once).
int64_t bert_parameter_count(const BertConfig& c);

}  // namespace dlperf

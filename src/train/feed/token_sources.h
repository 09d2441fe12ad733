// --data for the Llama models: which Megatron/NeMo indexed datasets, and with which weights
// (train/feed/llama_data.h reads them). Plain C++: the option parser checks it before MPI starts.
#pragma once

#include <string>
#include <vector>

namespace dlperf {

// What --data names for a Llama model, one or several Megatron/NeMo indexed datasets blended as
// Megatron-LM's --data-path does:
//   PREFIX                        one dataset (PREFIX.idx + PREFIX.bin)
//   W1,PREFIX1,W2,PREFIX2,...     a blend with weights (any positive numbers, normalised)
//   PREFIX1,PREFIX2,...           a blend weighted by each dataset's size (its windows)
//   DIR                           every PREFIX.idx + PREFIX.bin pair in DIR, in name order, by size
// Both files of every prefix must exist; any malformed spec is a usage error (one line).
struct TokenSource {
  std::string prefix;
  double weight = 0;  // as given; 0: by size
};
std::vector<TokenSource> parse_token_sources(const std::string& spec);
// "PREFIX" or "blend of N: 0.25 A, 0.75 B" / "blend of N by size: A, B" for the banner.
std::string describe_token_sources(const std::string& spec);

}  // namespace dlperf

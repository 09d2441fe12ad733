// dlperf-make-dataset: writes the deterministic synthetic JPEG dataset (data/synthetic_dataset.h)
// in both layouts dlperf-train --data reads. Exit codes: 0 written, 2 bad arguments or an
// unwritable directory (one line), 3 any other failure.
#include <boost/program_options.hpp>
#include <iostream>
#include <thread>

#include "core/error.h"
#include "core/file_io.h"
#include "core/given_options.h"
#include "core/parse_number.h"
#include "data/indexed_dataset.h"
#include "data/synthetic_dataset.h"
#include "dlperf_version.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  using namespace dlperf;
  data::SyntheticDatasetSpec s;
  std::string output, layout = "both", tokens;
  std::string seed = std::to_string(s.seed);  // parsed strictly below: boost wraps "-1" to 2^64-1
  int64_t documents = 64, doc_tokens = 256, vocab = 512;
  s.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  po::options_description opts(
      "dlperf-make-dataset: writes a synthetic ImageNet-like JPEG dataset as a folder tree (OUTPUT/train/<class>/*.JPEG) and as "
      "WebDataset tar shards (OUTPUT/shards/train-NNNNNN.tar); the same seed always gives the same bytes");
  // clang-format off
  opts.add_options()
    ("help,h", "print this help and exit")
    ("version", "print the version and exit")
    ("output", po::value(&output), "folder to write (required)")
    ("classes", po::value(&s.classes)->default_value(s.classes), "number of classes")
    ("images-per-class", po::value(&s.per_class)->default_value(s.per_class), "images per class")
    ("width", po::value(&s.width)->default_value(s.width), "image width (ImageNet's typical 500)")
    ("height", po::value(&s.height)->default_value(s.height), "image height (ImageNet's typical 375)")
    ("quality", po::value(&s.quality)->default_value(s.quality), "JPEG quality, 1..100")
    ("seed", po::value(&seed)->default_value(seed), "seed of the content and of the shard order, 0 to 2^64-1")
    ("layout", po::value(&layout)->default_value(layout), "folder, tar or both")
    ("shard-size", po::value(&s.shard_size)->default_value(s.shard_size), "samples per tar shard")
    ("greyscale-every", po::value(&s.greyscale_every)->default_value(0), "make every k-th image a greyscale JPEG (0: none)")
    ("cmyk-every", po::value(&s.cmyk_every)->default_value(0), "make every k-th image a CMYK JPEG (0: none)")
    ("threads", po::value(&s.threads)->default_value(s.threads), "encoding threads")
    ("tokens", po::value(&tokens), "instead of images: write a Megatron indexed token dataset PREFIX.bin + PREFIX.idx (dlperf-train "
                                   "--model llama* --data PREFIX): learnable documents, each an arithmetic progression of ids")
    ("documents", po::value(&documents)->default_value(documents), "--tokens: documents")
    ("document-tokens", po::value(&doc_tokens)->default_value(doc_tokens), "--tokens: mean tokens per document (lengths vary +-50%)")
    ("vocab", po::value(&vocab)->default_value(vocab), "--tokens: ids in [0, vocab)");
  // clang-format on
  try {
    po::variables_map vm;
    try {
      const po::parsed_options parsed = po::command_line_parser(argc, argv).options(opts).positional({}).run();  // no positional words
      po::store(parsed, vm);
      po::notify(vm);
      check_given_texts(parsed, vm);  // --tokens "$PREFIX" with it unset made images instead
    } catch (const po::error& e) {
      throw_usage_error(std::string(e.what()) + " (see --help)");
    }
    if (vm.count("help")) {
      std::cout << opts << '\n';
      if (const std::string why = flush_stdout_error(); !why.empty()) throw Error(ErrorKind::fault, why);
      return 0;
    }
    if (vm.count("version")) {
      std::cout << "dlperf-make-dataset " << DLPERF_VERSION << " (" << DLPERF_GIT_REVISION << ")\n";
      if (const std::string why = flush_stdout_error(); !why.empty()) throw Error(ErrorKind::fault, why);
      return 0;
    }
    if (const auto v = parse_uint64(seed)) s.seed = *v;
    else throw_usage_error("--seed takes an integer from 0 to 18446744073709551615 (got '" + seed + "')");
    // Options of the other mode were dropped silently (--tokens with --output wrote no folder).
    const auto given = [&](const char* name) { return vm.count(name) && !vm[name].defaulted(); };
    const bool token_mode = !tokens.empty();
    for (const char* name : {"output", "classes", "images-per-class", "width", "height", "quality", "layout", "shard-size",
                             "greyscale-every", "cmyk-every", "threads", "documents", "document-tokens", "vocab"}) {
      const bool token_option = std::string(name) == "documents" || std::string(name) == "document-tokens" || std::string(name) == "vocab";
      if (given(name) && token_option != token_mode)
        throw_usage_error(std::string("--") + name + (token_mode ? " is for images; --tokens writes a token dataset" : " is for --tokens (a token dataset)"));
    }
    if (!tokens.empty()) {
      if (documents <= 0) throw_usage_error("--documents must be positive (got " + std::to_string(documents) + ")");
      if (doc_tokens <= 1) throw_usage_error("--document-tokens must be 2 or more (got " + std::to_string(doc_tokens) + ")");
      if (vocab <= 1 || vocab > (int64_t{1} << 31) - 1)
        throw_usage_error("--vocab must be from 2 to 2147483647 (got " + std::to_string(vocab) + ")");
      uint64_t state = s.seed;  // SplitMix64 (this program links no engine)
      const auto next = [&state] {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
      };
      std::vector<std::vector<int32_t>> docs(static_cast<size_t>(documents));
      int64_t total = 0;
      for (auto& d : docs) {
        const int64_t n = doc_tokens / 2 + static_cast<int64_t>(next() % static_cast<uint64_t>(doc_tokens));
        const auto start = static_cast<int64_t>(next() % static_cast<uint64_t>(vocab));
        const int64_t step = 1 + static_cast<int64_t>(next() % 4);
        for (int64_t t = 0; t < n; ++t) d.push_back(static_cast<int32_t>((start + step * t) % vocab));
        total += n;
      }
      data::write_indexed_dataset(tokens, docs);
      std::cout << "dlperf-make-dataset: " << documents << " documents, " << total << " tokens, vocab " << vocab << "\n  " << tokens
                << ".bin\n  " << tokens << ".idx\n";
      return 0;
    }
    if (output.empty()) throw_usage_error("--output is required: the folder to write the dataset to");
    if (layout == "folder") s.shards = false;
    else if (layout == "tar") s.folder = false;
    else if (layout != "both") throw_usage_error("--layout '" + layout + "' is unknown: use folder, tar or both");
    if (s.threads <= 0 || s.threads > kMaxThreads)
      throw_usage_error("--threads must be 1 to " + std::to_string(kMaxThreads) + " (got " + std::to_string(s.threads) + ")");
    if (s.greyscale_every < 0 || s.cmyk_every < 0) throw_usage_error("--greyscale-every and --cmyk-every must be 0 or more");
    const auto sum = data::write_synthetic_dataset(output, s);
    std::cout << "dlperf-make-dataset: " << sum.samples << " images (" << s.classes << " classes x " << s.per_class << ", " << s.width
              << "x" << s.height << ", quality " << s.quality << ", " << sum.bytes / std::max<int64_t>(1, sum.samples) / 1024
              << " KiB on average)";
    for (const auto& w : sum.written) std::cout << "\n  " << w;
    std::cout << '\n';
    // The dataset is written; a summary that cannot be printed is still a failure to report.
    if (const std::string why = flush_stdout_error(); !why.empty()) throw Error(ErrorKind::fault, why + " (the dataset was written)");
    return 0;
  } catch (const Error& e) {
    std::cerr << "dlperf-make-dataset: " << e.what() << '\n';
    return e.kind() == ErrorKind::usage ? 2 : 3;
  } catch (const std::exception& e) {
    std::cerr << "dlperf-make-dataset: " << e.what() << '\n';
    return 3;
  }
}

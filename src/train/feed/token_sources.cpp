#include "train/feed/token_sources.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/parse_number.h"

namespace dlperf {
namespace {

bool is_dataset_prefix(const std::string& prefix) {
  std::error_code ec;
  return std::filesystem::is_regular_file(prefix + ".idx", ec) && std::filesystem::is_regular_file(prefix + ".bin", ec);
}

void require_dataset(const std::string& spec, const std::string& prefix) {
  for (const char* ext : {".idx", ".bin"}) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(prefix + ext, ec))
      throw_usage_error("--data " + spec + ": no file " + prefix + ext + " (a Megatron indexed dataset is PREFIX.idx + PREFIX.bin" +
                        (spec.find(',') != std::string::npos ? "; commas separate a blend's items, so a path cannot hold one)" : ")"));
  }
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> items;
  size_t from = 0;
  for (;;) {
    const size_t comma = s.find(',', from);
    items.push_back(s.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) return items;
    from = comma + 1;
  }
}

}  // namespace

std::vector<TokenSource> parse_token_sources(const std::string& spec) {
  std::vector<TokenSource> out;
  std::error_code ec;
  if (spec.find(',') != std::string::npos) {
    const std::vector<std::string> items = split_commas(spec);
    for (const auto& item : items)
      if (item.empty()) throw_usage_error("--data " + spec + ": an empty item in the comma list");
    if (parse_double(items.front())) {  // WEIGHT,PREFIX pairs
      if (items.size() % 2 != 0) throw_usage_error("--data " + spec + ": expected WEIGHT,PREFIX pairs, got " + std::to_string(items.size()) + " items");
      for (size_t i = 0; i < items.size(); i += 2) {
        const auto w = parse_double(items[i]);
        // Bounded so the weights' sum stays finite: two of 1e308 summed to inf, and every
        // normalised weight became 0.
        if (!w || !(*w > 0) || *w > 1e30)
          throw_usage_error("--data " + spec + ": weight '" + items[i] + "' of " + items[i + 1] + " is not a positive number up to 1e30");
        out.push_back({items[i + 1], *w});
      }
    } else {
      for (const auto& item : items) out.push_back({item, 0});
    }
  } else if (!is_dataset_prefix(spec) && std::filesystem::is_directory(spec, ec)) {
    std::vector<std::string> prefixes;
    for (const auto& entry : std::filesystem::directory_iterator(spec, ec)) {
      const std::filesystem::path& p = entry.path();
      if (p.extension() != ".idx" && p.extension() != ".bin") continue;
      std::error_code kind;
      if (entry.is_directory(kind)) continue;  // a folder named x.idx is no half of a dataset
      if (entry.is_symlink(kind) && !std::filesystem::exists(p, kind))
        throw_usage_error("--data " + spec + ": " + p.string() + " is a link to nothing (a dangling symbolic link)");
      std::string prefix = (p.parent_path() / p.stem()).string();
      // Half a pair (a copy cut short, a file left behind) would be left out of the blend unsaid.
      if (!is_dataset_prefix(prefix))
        throw_usage_error("--data " + spec + ": " + p.string() + " has no " + prefix + (p.extension() == ".idx" ? ".bin" : ".idx") +
                          " beside it (a Megatron indexed dataset is PREFIX.idx + PREFIX.bin; move other .bin and .idx files out of the folder)");
      if (p.extension() == ".idx") prefixes.push_back(std::move(prefix));
    }
    if (ec) throw_usage_error("--data " + spec + ": cannot list the folder: " + ec.message());
    if (prefixes.empty()) throw_usage_error("--data " + spec + ": a folder with no PREFIX.idx + PREFIX.bin pair in it");
    std::sort(prefixes.begin(), prefixes.end());
    // A folder's datasets are blended by size: one reached through two names (a link) would count
    // twice. One stat a dataset (every rank reads the folder; a parallel file system's stat is slow).
    std::map<std::pair<uint64_t, uint64_t>, std::string> seen;
    for (const auto& prefix : prefixes) {
      struct stat st {};
      if (::stat((prefix + ".bin").c_str(), &st) != 0) continue;  // refused when it is opened, naming it
      const auto [it, fresh] = seen.emplace(std::pair{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)}, prefix);
      if (!fresh)
        throw_usage_error("--data " + spec + ": " + prefix + ".bin is " + it->second +
                          ".bin (a link): the folder's datasets are blended by size, so it would count twice; remove the link");
    }
    for (auto& prefix : prefixes) out.push_back({std::move(prefix), 0});
  } else {
    out.push_back({spec, 0});
  }
  for (const auto& source : out) require_dataset(spec, source.prefix);
  return out;
}

std::string describe_token_sources(const std::string& spec) {
  const std::vector<TokenSource> sources = parse_token_sources(spec);
  if (sources.size() == 1) return sources.front().prefix;
  std::string s = "blend of " + std::to_string(sources.size()) + (sources.front().weight > 0 ? ": " : " by size: ");
  double total = 0;
  for (const auto& source : sources) total += source.weight;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (i > 0) s += ", ";
    if (total > 0) {
      char w[32];
      std::snprintf(w, sizeof w, "%.3g ", sources[i].weight / total);
      s += w;
    }
    s += sources[i].prefix;
  }
  return s;
}

}  // namespace dlperf

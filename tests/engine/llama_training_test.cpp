// Llama end to end on the CPU backend: the published parameter counts (counted, and planned
// for the 1B without touching its memory), configuration errors, a reduced model learning the
// synthetic token stream with Llama 3's AdamW recipe in fp32 and bf16, untied and tied, and
// bit-for-bit determinism. (Two MPI ranks: tests/cli/llama_cli_test.sh.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "models/llama.h"
#include "train/optim/adam.h"
#include "train/feed/llama_data.h"
#include "train/param_store.h"
#include "train/measure/llm_measures.h"
#include "train/measure/peak_flops.h"
#include "../common/cpu_bf16.h"

namespace dlperf {
namespace {

TEST(LlamaModel, PublishedParameterCounts) {
  EXPECT_EQ(llama_parameter_count(llama_preset("llama3_8b")), 8030261248);
  EXPECT_EQ(llama_parameter_count(llama_preset("llama3_2_1b")), 1235814400);
  // The planned model declares exactly those (the 1B: 4.9 GB of f32 never touched, a 16-token
  // sequence keeps the activations small).
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 2, 0});
  LlamaConfig c = llama_preset("llama3_2_1b");
  c.seq_len = 16;
  auto model = make_llama(*be, c);
  int64_t n = 0;
  for (Layer* l : model->layers())
    for (const auto& p : l->params()) n += product(p.dims);
  EXPECT_EQ(n, 1235814400);
}

// docs/llm.md: forward FLOPs per token = 2 x every matmul weight + attention's causal half.
TEST(LlamaModel, ModelFlopsPerToken) {
  const LlamaConfig c = llama_preset("llama3_8b");
  EXPECT_DOUBLE_EQ(llama_forward_flops_per_token(c), 17157062656.0);  // at seq 8,192; 3x for training
  for (const char* m : {"llama3_8b", "llama3_2_1b"}) {
    LlamaConfig k = llama_preset(m);
    k.seq_len = 1000;
    const double head = k.tied ? static_cast<double>(k.vocab * k.hidden) : 0.0;  // the tied table is also the head
    const double matmul_weights = static_cast<double>(llama_parameter_count(k) - k.vocab * k.hidden - (2 * k.layers + 1) * k.hidden) + head;
    const double attention = 4.0 * static_cast<double>(k.hidden) * static_cast<double>(k.layers) * 1001.0 / 2.0;  // D x Hq = hidden
    EXPECT_DOUBLE_EQ(llama_forward_flops_per_token(k), 2.0 * matmul_weights + attention) << m;
  }
  // PaLM's convention (appendix B), training: 6 N + 12 L H T, N without the embedding table. Ours
  // with full attention is it less the norms' weights, which are no matmul (6 x 65 x 4,096).
  const double palm = 6.0 * static_cast<double>(llama_parameter_count(c) - c.vocab * c.hidden) + 12.0 * 32 * 4096 * 8192;
  EXPECT_DOUBLE_EQ(3.0 * llama_forward_flops_per_token(c, true), palm - 6.0 * 65 * 4096);
  EXPECT_NEAR(3.0 * llama_forward_flops_per_token(c, true) / 1e9, 57.91, 0.01);
}

TEST(LlamaModel, PeakTableAndOverride) {
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA H100 80GB HBM3", Precision::bf16), 989.4);
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA H100 PCIe", Precision::bf16), 756.0);
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA H200", Precision::fp16), 989.4);
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA A100-SXM4-80GB", Precision::tf32), 156.0);
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA B200", Precision::bf16), 2250.0);
  // Names that contain another's: the NVL cards got the SXM rows, GB200 the B200 one.
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA H100 NVL", Precision::bf16), 835.5);
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA H200 NVL", Precision::tf32), 417.5);
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("NVIDIA GB200", Precision::bf16), 2500.0);
  EXPECT_DOUBLE_EQ(gpu_peak_tflops("Tesla V100-SXM2-32GB", Precision::fp16), 0.0);
  EXPECT_EQ(peak_flops(123.0, BackendKind::cuda, Precision::bf16, "NVIDIA H100 80GB HBM3", "", 1).tflops, 123.0);
  EXPECT_EQ(peak_flops(0, BackendKind::cuda, Precision::fp16, "Tesla V100", "", 1).tflops, 0.0);
  const PeakFlops cpu = peak_flops(0, BackendKind::cpu, Precision::fp32, "", "avx512_core", 4);
  if (cpu.tflops > 0) {
    const std::string want = "4 cores x " + std::to_string(static_cast<int>(cpu_flops_per_cycle("avx512_core", Precision::fp32, this_cpu_family())));
    EXPECT_NE(cpu.source.find(want), std::string::npos) << cpu.source;
  }
}

// FLOPs per cycle per core: two 512-bit FMA units on Intel's AVX-512 and AMD's Zen 5; Zen 4
// (family 25) runs 512-bit operations on 256-bit units, half of it; AMX on Intel only.
TEST(LlamaModel, CpuPeakPerCycleFollowsTheMicroarchitecture) {
  const CpuFamily intel{"GenuineIntel", 6}, zen4{"AuthenticAMD", 25}, zen5{"AuthenticAMD", 26};
  std::string why;
  EXPECT_EQ(cpu_flops_per_cycle("avx512_core_amx", Precision::fp32, intel), 64);
  EXPECT_EQ(cpu_flops_per_cycle("avx512_core_amx", Precision::bf16, intel), 1024);
  EXPECT_EQ(cpu_flops_per_cycle("avx2", Precision::fp32, intel), 32);
  EXPECT_EQ(cpu_flops_per_cycle("avx512_core_bf16", Precision::fp32, zen4, &why), 32);
  EXPECT_NE(why.find("Zen 4"), std::string::npos);
  EXPECT_EQ(cpu_flops_per_cycle("avx512_core_bf16", Precision::bf16, zen4), 64);
  EXPECT_EQ(cpu_flops_per_cycle("avx2", Precision::fp32, zen4), 32);  // Zen 3 (also family 25): AVX2 only
  why.clear();
  EXPECT_EQ(cpu_flops_per_cycle("avx512_core_bf16", Precision::fp32, zen5, &why), 64);
  EXPECT_EQ(cpu_flops_per_cycle("avx512_core_bf16", Precision::bf16, zen5), 128);
  EXPECT_TRUE(why.empty()) << why;
}

// Ranks with their own peaks (other thread counts, ISAs or clocks): MFU's denominator is their
// mean, whatever rank comes first, and the source names each.
TEST(LlamaModel, PeakOfRanksThatDifferIsTheirMean) {
  const PeakFlops same = mean_peak({2.0, 2.0}, {"estimate: 1 cores", "estimate: 1 cores"});
  EXPECT_DOUBLE_EQ(same.tflops, 2.0);
  EXPECT_EQ(same.source, "estimate: 1 cores");
  const PeakFlops a = mean_peak({1.0, 3.0}, {"estimate: 1 cores", "estimate: 3 cores"});
  const PeakFlops b = mean_peak({3.0, 1.0}, {"estimate: 3 cores", "estimate: 1 cores"});
  EXPECT_DOUBLE_EQ(a.tflops, 2.0);
  EXPECT_DOUBLE_EQ(b.tflops, 2.0);
  EXPECT_EQ(a.source, "mean of the ranks' estimate: 1 cores (rank 0); estimate: 3 cores (rank 1)");
  EXPECT_EQ(mean_peak({1.0, 0.0}, {"x", "unknown CPU clock"}).tflops, 0.0);
}

TEST(LlamaModel, BadConfigurationsAreUsageErrors) {
  const auto expect_usage = [](LlamaConfig c, const char* flag) {
    try {
      validate_llama(c);
      ADD_FAILURE() << "no error for " << flag;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage);
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  LlamaConfig c = llama_preset("llama3_8b");
  c.heads = 30;  // does not divide 4096
  expect_usage(c, "--llama-heads");
  c = llama_preset("llama3_8b"), c.kv_heads = 5;  // does not divide 32
  expect_usage(c, "--llama-kv-heads");
  c = llama_preset("llama3_8b"), c.hidden = 96, c.heads = 32;  // head dim 3: RoPE needs pairs
  expect_usage(c, "even");
  c = llama_preset("llama3_8b"), c.seq_len = 0;
  expect_usage(c, "--seq-len");
  c = llama_preset("llama3_8b"), c.batch = 3, c.seq_len = 100, c.logits_chunk = 64;  // 300 tokens
  expect_usage(c, "--logits-chunk 64 must divide the batch's 300 tokens");
}

// --logits-chunk auto: whole logits unless f32 over 1 GiB, or over 2^31 - 1 elements.
TEST(LlamaModel, AutoLogitsChunkSplitsOnlyLogitsTooLargeToHold) {
  EXPECT_EQ(auto_logits_chunk(8192, 128256, 2), 0);     // bf16, 2.1 GB: held whole
  EXPECT_EQ(auto_logits_chunk(8192, 128256, 4), 2048);  // f32, 4.2 GB: 4 chunks of 1.05 GB
  EXPECT_EQ(auto_logits_chunk(16384, 128256, 2), 0);      // bf16, 2.10e9 elements: under 2^31
  EXPECT_EQ(auto_logits_chunk(32768, 128256, 2), 16384);  // bf16, 4.2e9 elements: 2 chunks
  EXPECT_EQ(auto_logits_chunk(2048, 32000, 4), 0);       // the reduced benchmark's 262 MB
  EXPECT_EQ(auto_logits_chunk(3 * 8192, 128256, 4), 2048);  // 12 chunks of 2,048 tokens
}

LlamaConfig reduced(bool tied) {
  LlamaConfig c = llama_preset(tied ? "llama3_2_1b" : "llama3_8b");
  c.layers = 2, c.hidden = 64, c.heads = 4, c.kv_heads = 2, c.ffn = 176, c.vocab = 128;
  c.batch = 4, c.seq_len = 48;
  return c;
}

std::vector<float> train(Precision prec, bool tied, int steps) {
  auto be = make_backend(BackendKind::cpu, {prec, 2, 0});
  const LlamaConfig c = reduced(tied);
  auto model = make_llama(*be, c);
  ParamStore store(*be, model->layers());
  model->init_params(7);
  std::unique_ptr<Optimizer> opt = std::make_unique<AdamW>(*be, store, AdamConfig{0.9f, 0.95f, 1e-8f, 0.1f});
  opt = std::make_unique<ClipGradNorm>(*be, store, std::move(opt), 1.0f);
  SyntheticLlamaTokens data(c.batch, c.seq_len, c.vocab, 11);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    model->load(data.next());
    for (Layer* l : model->layers()) l->refresh_compute_weights();
    model->forward();
    losses.push_back(model->loss());
    model->backward(1.0f, [](const Layer&) {});
    opt->step(3e-3f, 1.0f);
  }
  return losses;
}

void expect_learns(const std::vector<float>& l, float drop) {
  const auto mean = [&](size_t a, size_t b) { return std::accumulate(l.begin() + long(a), l.begin() + long(b), 0.0f) / float(b - a); };
  const float first = mean(0, 3), last = mean(l.size() - 3, l.size());
  for (float x : l) EXPECT_TRUE(std::isfinite(x));
  EXPECT_NEAR(l[0], std::log(128.0f), 0.3f);  // N(0, 0.02) weights: near-uniform predictions at first
  EXPECT_LT(last, first - drop) << "loss " << first << " -> " << last;
}

TEST(LlamaTraining, LowersTheLossFp32) { expect_learns(train(Precision::fp32, false, 25), 1.0f); }
TEST(LlamaTraining, LowersTheLossBf16Tied) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
  expect_learns(train(Precision::bf16, true, 25), 1.0f);
}
TEST(LlamaTraining, SameSeedSameLossesBitForBit) { EXPECT_EQ(train(Precision::fp32, false, 3), train(Precision::fp32, false, 3)); }

// Indexed-dataset windows: 2 ranks read disjoint windows of T + 1 consecutive tokens within an
// epoch, no window twice; the next epoch is another shuffle of the windows; same seed, same
// batches.
TEST(LlamaData, IndexedWindowsShuffledPerEpochAndSharedByRanks) {
  const std::string prefix = (std::filesystem::temp_directory_path() / ("dlperf_win_" + std::to_string(::getpid()))).string();
  std::vector<std::vector<int32_t>> docs{{}, {}, {}};
  for (int32_t t = 0; t < 1000; ++t) docs[static_cast<size_t>(t % 3 == 0 ? 0 : t < 500 ? 1 : 2)].push_back(t);
  std::sort(docs[0].begin(), docs[0].end());
  std::vector<int32_t> flat;  // ids 0..999 in file order: token i of the concatenation is flat[i]
  for (auto& d : docs) flat.insert(flat.end(), d.begin(), d.end());
  data::write_indexed_dataset(prefix, docs);
  const int64_t T = 16, B = 3;
  IndexedTokens r0(prefix, B, T, 1000, 5, 0, 2), r1(prefix, B, T, 1000, 5, 1, 2), again(prefix, B, T, 1000, 5, 0, 2);
  EXPECT_EQ(r0.windows(), 999 / 16);                  // 62
  EXPECT_EQ(r0.steps_per_epoch(), 62 / (2 * 3));      // 10
  std::vector<std::set<int32_t>> epochs(2);
  std::vector<int32_t> order[2];
  for (int e = 0; e < 2; ++e)
    for (int64_t s = 0; s < r0.steps_per_epoch(); ++s)
      for (IndexedTokens* src : {&r0, &r1}) {
        const auto& tok = src->next().ints.at(kLlamaTokens);
        if (src == &r0) {
          EXPECT_EQ(tok, again.next().ints.at(kLlamaTokens));
        }
        for (int64_t b = 0; b < B; ++b) {
          const int32_t first = tok[static_cast<size_t>(b * (T + 1))];
          const auto at = std::find(flat.begin(), flat.end(), first) - flat.begin();
          ASSERT_EQ(at % T, 0) << "a window starts at a multiple of T";
          for (int64_t t = 0; t <= T; ++t) ASSERT_EQ(tok[static_cast<size_t>(b * (T + 1) + t)], flat[static_cast<size_t>(at + t)]);
          EXPECT_TRUE(epochs[static_cast<size_t>(e)].insert(first).second) << "window read twice in epoch " << e;
          order[e].push_back(first);
        }
      }
  EXPECT_EQ(epochs[0].size(), 60u);  // 60 of the 62 windows each epoch (the remainder left out) ...
  EXPECT_EQ(epochs[1].size(), 60u);
  EXPECT_NE(order[0], order[1]);     // ... in another order
  try {
    IndexedTokens too_big(prefix, 40, T, 1000, 5, 0, 2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than ranks x --batch-size = 80"), std::string::npos) << e.what();
  }
  std::filesystem::remove(prefix + ".bin"), std::filesystem::remove(prefix + ".idx");
}

// A blend (Megatron's weighted --data-path): two datasets with disjoint ids, weights 1:3. Every
// prefix of the epoch's sample sequence holds each dataset within one sample of its weight;
// each sample is a whole window of its own dataset; within an epoch the ranks read disjoint
// windows; unweighted, a list and a folder blend by size; malformed specs are usage errors.
TEST(LlamaData, BlendsDatasetsByWeightAsMegatronDoes) {
  const auto dir = std::filesystem::temp_directory_path() / ("dlperf_blend_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string a = (dir / "a").string(), b = (dir / "b").string();
  std::vector<std::vector<int32_t>> da(1), db(1);
  for (int32_t t = 0; t < 400; ++t) da[0].push_back(t);         // 399 / 8 = 49 windows
  for (int32_t t = 500; t < 1000; ++t) db[0].push_back(t);      // 499 / 8 = 62 windows
  data::write_indexed_dataset(a, da), data::write_indexed_dataset(b, db);
  const int64_t T = 8, B = 2;
  const std::string spec = "1," + a + ",3," + b;
  IndexedTokens r0(spec, B, T, 1000, 7, 0, 2), r1(spec, B, T, 1000, 7, 1, 2);
  EXPECT_EQ(r0.windows(), 49 + 62);
  EXPECT_EQ(r0.steps_per_epoch(), 111 / 4);  // 27
  ASSERT_EQ(r0.weights().size(), 2u);
  EXPECT_DOUBLE_EQ(r0.weights()[0], 0.25);
  int64_t from_b = 0, seen = 0;
  std::set<int32_t> epoch_a;
  for (int64_t s = 0; s < r0.steps_per_epoch(); ++s)
    for (IndexedTokens* src : {&r0, &r1}) {
      const auto& tok = src->next().ints.at(kLlamaTokens);
      for (int64_t i = 0; i < B; ++i) {
        const int32_t first = tok[static_cast<size_t>(i * (T + 1))];
        const bool in_b = first >= 500;
        ASSERT_EQ((first - (in_b ? 500 : 0)) % T, 0) << "a window starts at a multiple of T of its dataset";
        for (int64_t t = 0; t <= T; ++t) ASSERT_EQ(tok[static_cast<size_t>(i * (T + 1) + t)], first + t);
        from_b += in_b, ++seen;
        EXPECT_LE(std::abs(0.75 * static_cast<double>(seen) - static_cast<double>(from_b)), 1.0) << "after " << seen << " samples";
        if (!in_b) {
          EXPECT_TRUE(epoch_a.insert(first).second) << "window of a read twice in one epoch";
        }
      }
    }
  // b, weighted above its size (0.75 x 108 = 81 samples > 62 windows), is cycled: reshuffled.
  EXPECT_EQ(from_b, 81);
  EXPECT_EQ(epoch_a.size(), 27u);
  for (const std::string& by_size : {a + "," + b, dir.string()}) {
    IndexedTokens s(by_size, B, T, 1000, 7, 0, 2);
    EXPECT_NEAR(s.weights()[0], 49.0 / 111, 1e-12) << by_size;
  }
  EXPECT_EQ(describe_token_sources(spec), "blend of 2: 0.25 " + a + ", 0.75 " + b);
  // The blend staged elsewhere is the same data; other weights are not.
  {
    const auto staged = dir / "staged";
    std::filesystem::create_directories(staged);
    for (const char* f : {"a.idx", "a.bin", "b.idx", "b.bin"}) std::filesystem::copy_file(dir / f, staged / f);
    EXPECT_EQ(IndexedTokens("1," + (staged / "a").string() + ",3," + (staged / "b").string(), B, T, 1000, 7, 1, 2).fingerprint(),
              r0.fingerprint());
    EXPECT_NE(IndexedTokens("3," + a + ",1," + b, B, T, 1000, 7, 0, 2).fingerprint(), r0.fingerprint());
    std::filesystem::remove_all(staged);
  }
  const std::pair<std::string, std::string> bad[] = {
      {"1," + a + ",3", "expected WEIGHT,PREFIX pairs, got 3 items"},
      {"0," + a + ",3," + b, "weight '0' of " + a + " is not a positive number"},
      {"1e308," + a + ",1e308," + b, "weight '1e308' of " + a + " is not a positive number up to 1e30"},  // sum: inf
      {a + ",," + b, "an empty item in the comma list"},
      {"1," + a + ",1," + (dir / "c").string(), "no file " + (dir / "c").string() + ".idx (a Megatron indexed dataset is PREFIX.idx + PREFIX.bin; commas separate"},
      {(dir / "empty").string(), "a folder with no PREFIX.idx + PREFIX.bin pair in it"},
      // Half a pair in a folder: refused, not left out of the blend.
      {(dir / "half").string(), (dir / "half" / "b.idx").string() + " has no " + (dir / "half" / "b").string() + ".bin beside it"},
      {(dir / "halfbin").string(), (dir / "halfbin" / "b.bin").string() + " has no " + (dir / "halfbin" / "b").string() + ".idx beside it"},
      // One dataset through two names in a folder: refused, not counted twice.
      {(dir / "linked").string(), (dir / "linked" / "b").string() + ".bin is " + (dir / "linked" / "a").string() + ".bin (a link)"},
      {(dir / "dangling").string(), (dir / "dangling" / "b.bin").string() + " is a link to nothing"},
  };
  std::filesystem::create_directories(dir / "empty");
  for (const char* sub : {"half", "halfbin", "linked"}) {
    std::filesystem::create_directories(dir / sub);
    for (const char* ext : {".idx", ".bin"}) std::filesystem::copy_file(a + ext, (dir / sub / "a").string() + ext);
  }
  std::filesystem::create_directories(dir / "dangling");
  for (const char* ext : {".idx", ".bin"}) std::filesystem::copy_file(a + ext, (dir / "dangling" / "a").string() + ext);
  std::filesystem::create_symlink(dir / "nowhere.bin", dir / "dangling" / "b.bin");
  // A folder named like half a dataset is no half of one: the folder blends as before.
  std::filesystem::create_directories(dir / "withdir" / "x.idx");
  for (const char* ext : {".idx", ".bin"}) std::filesystem::copy_file(a + ext, (dir / "withdir" / "a").string() + ext);
  EXPECT_EQ(parse_token_sources((dir / "withdir").string()).size(), 1u);
  std::filesystem::copy_file(a + ".idx", dir / "half" / "b.idx");
  std::filesystem::copy_file(a + ".bin", dir / "halfbin" / "b.bin");
  for (const char* ext : {".idx", ".bin"}) std::filesystem::create_symlink((dir / "linked" / "a").string() + ext, (dir / "linked" / "b").string() + ext);
  for (const auto& [s, want] : bad) {
    try {
      (void)parse_token_sources(s);
      ADD_FAILURE() << s << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlperf

// Schema 1.3: the LLM measures of issue 24 (docs/trace-schema.md, "LLM runs"), run-group
// attributes written only for runs that have them, so other runs' groups are unchanged:
//   model_flops_per_token   f64   training model FLOPs per token (3 x forward; docs/llm.md)
//   peak_tflops_per_device  f64   the peak MFU is taken against
//   peak_source             str   "--peak-tflops", a datasheet row, or the CPU estimate's terms
//   tokens_per_s            f64   the run's tokens/s over its measured window, all ranks
//   mfu                     f64   tokens_per_s x model_flops_per_token / (world_size x peak)
#include "trace/h5_io.h"
#include "trace/trace_schema.h"

namespace dlperf::trace_schema {

void write_llm_fields(hid_t group, const RunInfo& info) {
  if (info.model_flops_per_token <= 0) return;
  h5::write_attr(group, "model_flops_per_token", info.model_flops_per_token);
  h5::write_attr(group, "peak_tflops_per_device", info.peak_tflops_per_device);
  h5::write_attr(group, "peak_source", info.peak_source);
  h5::write_attr(group, "tokens_per_s", info.tokens_per_s);
  h5::write_attr(group, "mfu", info.mfu);
}

void read_llm_fields(hid_t group, RunInfo& info) {
  info.model_flops_per_token = h5::read_double_attr(group, "model_flops_per_token", 0.0);
  info.peak_tflops_per_device = h5::read_double_attr(group, "peak_tflops_per_device", 0.0);
  info.peak_source = h5::read_string_attr_if(group, "peak_source").value_or("");
  info.tokens_per_s = h5::read_double_attr(group, "tokens_per_s", 0.0);
  info.mfu = h5::read_double_attr(group, "mfu", 0.0);
}

}  // namespace dlperf::trace_schema

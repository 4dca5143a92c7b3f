#include "actors/shared/slicing.hpp"

#include "runtime/algorithm/slices.hpp"

namespace atl {

codec_kind result_codec_of(const run_config& run) {
  if (run.mode == "ddp") return codec_kind::fp32;
  const auto codec = parse_codec(run.result_codec == "same" ? run.codec : run.result_codec);
  return codec ? *codec : codec_kind::fp32;
}

std::size_t slice_granule_of(const run_config& run) {
  outer_rule rule;
  rule.result_codec = result_codec_of(run);
  rule.result_chunk = static_cast<std::size_t>(run.codec_chunk);
  const auto contributions = parse_codec(run.codec);
  const bool chunked = contributions && has_scales(*contributions);
  return slice_granule(rule, chunked ? static_cast<std::size_t>(run.codec_chunk) : 0);
}

}  // namespace atl

#pragma once
// How a run cuts its fragments into sync units (diloco.shards; runtime/algorithm/slices.hpp):
// what the workers, which split and assemble them, and the coordinators, which step them,
// must agree on.
#include <cstddef>

#include "runtime/algorithm/codec.hpp"
#include "runtime/process/config.hpp"

namespace atl {

// The codec of the coordinators' results: diloco.result_codec ("same": diloco.codec); fp32
// in ddp mode, whose rounds release the average itself. The config was validated.
codec_kind result_codec_of(const run_config& run);

// What every slice of the run starts on: whole blocks of the outer step and whole chunks
// of the contributions (slice_granule).
std::size_t slice_granule_of(const run_config& run);

}  // namespace atl

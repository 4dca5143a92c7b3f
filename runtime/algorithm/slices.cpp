#include "runtime/algorithm/slices.hpp"

#include <algorithm>
#include <numeric>
#include <string>

namespace atl {

std::size_t slice_granule(const outer_rule& rule, std::size_t contribution_chunk) {
  return std::lcm(outer_block_values(rule), std::max<std::size_t>(1, contribution_chunk));
}

std::vector<fragment_slice> plan_slices(std::size_t values, std::size_t granule, std::size_t shards) {
  granule = std::max<std::size_t>(1, granule);
  const std::size_t granules = (values + granule - 1) / granule;
  const std::size_t count = std::max<std::size_t>(1, std::min(shards, granules));
  // granules = count * base + extra: the first `extra` slices take one granule more.
  const std::size_t base = granules / count, extra = granules % count;
  std::vector<fragment_slice> slices;
  std::size_t first = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t end = std::min(values, first + (base + (i < extra ? 1 : 0)) * granule);
    slices.push_back({first, end - first});
    first = end;
  }
  return slices;
}

std::size_t auto_shards(const std::vector<std::size_t>& fragment_values, std::size_t granule, std::size_t members,
                        std::size_t max_units) {
  granule = std::max<std::size_t>(1, granule);
  std::size_t shards = std::min(members, max_auto_shards);
  if (!fragment_values.empty()) shards = std::min(shards, max_units / fragment_values.size());
  for (const auto values : fragment_values) shards = std::min(shards, (values + granule - 1) / granule);
  return std::max<std::size_t>(1, shards);
}

expected<encoded_values> cut_encoded(const encoded_values& whole, const fragment_slice& slice) {
  const std::size_t end = slice.first + slice.count;
  if (end < slice.first || end > whole.count)
    return make_error(errc::invalid_config, "slice [" + std::to_string(slice.first) + ", " + std::to_string(end) +
                                                ") lies outside the tensor of " + std::to_string(whole.count) +
                                                " values");
  const bool chunked = has_scales(whole.kind);
  if (chunked && (whole.chunk == 0 || slice.first % whole.chunk != 0 || (end % whole.chunk != 0 && end != whole.count)))
    return make_error(errc::invalid_config, "slice [" + std::to_string(slice.first) + ", " + std::to_string(end) +
                                                ") does not start and end on chunks of " + std::to_string(whole.chunk));
  if (whole.payload.size() != payload_bytes(whole.kind, whole.count, whole.chunk) ||
      whole.scales.size() != scale_count(whole.kind, whole.count, whole.chunk))
    return make_error(errc::tensor_mismatch, "the encoded tensor's sizes do not match its count");
  encoded_values part;
  part.kind = whole.kind;
  part.count = slice.count;
  part.chunk = whole.chunk;
  // Every codec lays its bytes out chunk after chunk (value after value for the dense ones
  // without chunks), so a slice that starts on a chunk starts at the bytes of the values
  // before it.
  const auto from =
      whole.payload.begin() + static_cast<std::ptrdiff_t>(payload_bytes(whole.kind, slice.first, whole.chunk));
  part.payload.assign(from, from + static_cast<std::ptrdiff_t>(payload_bytes(whole.kind, slice.count, whole.chunk)));
  if (chunked) {
    const auto scales = whole.scales.begin() + static_cast<std::ptrdiff_t>(slice.first / whole.chunk);
    part.scales.assign(scales, scales + static_cast<std::ptrdiff_t>(scale_count(whole.kind, slice.count, whole.chunk)));
  }
  return part;
}

}  // namespace atl

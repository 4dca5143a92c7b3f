#pragma once
// The run's TorchScript model file, from the head to the nodes that join without a copy.
//
// The head keeps the file in its run dir and answers the control command "model":
//   argument ""       -> JSON {"digest": "<16 hex>", "bytes": N}, digest empty without a model
//   argument "OFFSET" -> JSON {"offset": OFFSET, "bytes": n} and the n bytes from OFFSET
//                        (at most model_chunk_bytes) as one uint8 tensor
// over the same CURVE-authenticated link as every other control request. A node fetches
// the chunks in order into a partial file, checks the digest of the whole, and renames
// it into place; a copy already there with the right digest is used as it is.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"
#include "runtime/transport/security.hpp"

namespace atl {

constexpr std::uint64_t model_chunk_bytes = 4u << 20;

// digest64 of the whole file, as 16 hex digits (errc::bad_model when it cannot be read).
expected<std::string> file_digest(const std::string& path);

// Up to `max` bytes of `path` from `offset` (fewer at the end of the file).
expected<std::vector<std::uint8_t>> read_file_chunk(const std::string& path, std::uint64_t offset, std::uint64_t max);

struct model_source {
  std::string head;  // the head's endpoint
  link_security security;
  std::chrono::milliseconds timeout{10000};  // per request
};

// The run's model digest and size as the head tells them; digest empty: no model.
struct model_offer {
  std::string digest;
  std::uint64_t bytes = 0;
};
expected<model_offer> ask_for_model(const model_source& from);

// Fetches the offered model into `dest` (a file path), unless `dest` already holds it.
// `progress(done, total)` is called after each chunk. Errors: timeout (the head went
// away), digest_mismatch (the bytes that came are not the offered file), storage_failure.
status fetch_model(const model_source& from, const model_offer& offer, const std::string& dest,
                   const std::function<void(std::uint64_t, std::uint64_t)>& progress = {});

}  // namespace atl

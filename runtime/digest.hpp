#pragma once
// digest64: a stable 64-bit hash of raw bytes, used for tensor checksums on the wire and
// for comparing copies of theta_global across processes. Stable means: the same bytes give
// the same value on every build and machine (little-endian reads, fixed constants); the
// unit tests pin known values. It is not a cryptographic hash.
#include <cstddef>
#include <cstdint>
#include <string>

namespace atl {

std::uint64_t digest64(const void* data, std::size_t size);

// 16 lowercase hex digits, the form shown by atollctl.
std::string digest_hex(std::uint64_t digest);

}  // namespace atl

#pragma once
// What a keeper reads from a commit and says back, made apart from the actor.
#include <cstdint>

#include "runtime/core/expected.hpp"
#include "runtime/transport/wire.hpp"
#include "storage/checkpoint_store.hpp"

namespace atl {

// A full CommitRequest's theta and momentum (and perhaps residual), read in place from its
// fp32 frames, which the message keeps alive while the keeper writes them. tensor_mismatch
// for another count, dtype or size of frames.
expected<checkpoint_view> commit_values(const wire::message& msg);

// CommitAck(writing): the whole request is in, the coordinator may send early results.
void write_writing_notice(wire::outgoing& out, std::uint32_t fragment, std::uint64_t round);
// CommitAck: ok, or the error (behind: not_ready, the round before the record is missing);
// `digest`: of theta as committed.
void write_commit_ack(wire::outgoing& out, std::uint32_t fragment, std::uint64_t round, std::uint64_t digest,
                      const status& result);

}  // namespace atl

#pragma once
// The round log's record on the wire: a CommitRequest that is `logged` carries a
// round_record (storage/round_record.hpp) as fields and tensor frames, one payload frame per
// input and a scales frame after it for int8 and fp4. The frames are the contributions' own:
// a coordinator forwards what it received, and a keeper writes from the frames in place.
#include <vector>

#include "runtime/transport/wire.hpp"
#include "storage/round_record.hpp"

namespace atl {

// The record's frames, each hashed once: a coordinator sends them to every keeper and again
// on a retry.
std::vector<wire::tensor> record_tensors(const round_record& record);

// Fills a CommitRequest's fields for `record` (logged; the tensors go separately).
void put_commit_record(schema::CommitRequest::Builder req, const round_record& record);

// The record a logged CommitRequest carries, pointing into its frames (no copy). Typed
// errors: tensor_mismatch when the fields, the frames and the codecs do not agree.
expected<round_record> take_commit_record(const wire::message& msg);

}  // namespace atl

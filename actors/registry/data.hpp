#pragma once
// The registry's handlers of a worker's data messages (run.data_cursor): a DataLeaseRequest
// (answered with a DataLease) and a DataTie beside a contribution. The cursor itself
// changes in actors/registry/cursor.hpp.
#include "actors/registry/outbox.hpp"

namespace atl::registry_detail {

void on_data_lease_request(self_ptr self, const wire::message_ptr& msg);
void on_data_tie(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::registry_detail

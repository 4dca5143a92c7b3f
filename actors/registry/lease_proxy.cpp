#include "actors/registry/lease_proxy.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/decisions/liveness.hpp"
#include "actors/shared/messages.hpp"

namespace atl {
namespace {

// Quits when the node is no longer alive; true if it did.
bool quit_unless_alive(caf::stateful_actor<lease_proxy_state>* self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  const auto since = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - t);
  };
  liveness_facts facts;
  facts.since_heartbeat = since(st.renewed);
  if (st.suspected) facts.since_connection_closed = since(*st.suspected);
  facts.lease = st.lease;
  facts.confirm = st.confirm;
  switch (judge_liveness(facts)) {
    case liveness_verdict::alive: return false;
    case liveness_verdict::lease_expired: self->quit(caf::exit_reason::unreachable); return true;
    case liveness_verdict::connection_lost: self->quit(caf::exit_reason::remote_link_unreachable); return true;
  }
  return false;
}

}  // namespace

caf::behavior lease_proxy(caf::stateful_actor<lease_proxy_state>* self, std::string peer,
                          std::chrono::milliseconds lease, std::chrono::milliseconds confirm) {
  auto& st = self->state;
  st.peer = std::move(peer);
  st.lease = lease;
  st.confirm = confirm;
  st.renewed = self->clock().now();
  // Checked when the lease would end if no renewal came: a renewal moves that later, and
  // the check then waits again for what is left, so an expiry is seen on time.
  const auto check_at_lease_end = [self] {
    const auto left = self->state.lease -
                      std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now() - self->state.renewed);
    self->delayed_send(self, std::max(std::chrono::milliseconds(1), left), tick_atom::value);
  };
  check_at_lease_end();
  return {
      // A heartbeat that arrived `waited_us` ago (it waited in the registry's mailbox behind
      // other work): the lease counts from its arrival, so a busy head does not stretch it.
      [=](renew_atom, std::int64_t waited_us) {
        const auto arrived = self->clock().now() - std::chrono::microseconds(std::max<std::int64_t>(0, waited_us));
        self->state.renewed = std::max(self->state.renewed, arrived);
        self->state.suspected.reset();
      },
      [=](suspect_atom) {
        if (self->state.suspected || self->state.confirm.count() == 0) return;
        self->state.suspected = self->clock().now();
        self->delayed_send(self, self->state.confirm, deadline_atom::value);
      },
      [=](deadline_atom) { quit_unless_alive(self); },  // the suspicion's confirm window ended
      [=](tick_atom) {
        if (!quit_unless_alive(self)) check_at_lease_end();
      },
  };
}

}  // namespace atl

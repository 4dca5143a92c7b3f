#include "actors/lease_proxy.hpp"

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace atl {

caf::behavior lease_proxy(caf::stateful_actor<lease_proxy_state>* self, std::string peer,
                          std::chrono::milliseconds lease) {
  auto& st = self->state;
  st.peer = std::move(peer);
  st.lease = lease;
  st.renewed = self->clock().now();
  // Checked four times per lease: an expiry is seen at most a quarter lease late.
  const auto check_every = std::max(std::chrono::milliseconds(1), lease / 4);
  self->delayed_send(self, check_every, tick_atom::value);
  return {
      [=](renew_atom) { self->state.renewed = self->clock().now(); },
      [=](tick_atom) {
        if (self->clock().now() - self->state.renewed >= self->state.lease) {
          self->quit(caf::exit_reason::unreachable);
          return;
        }
        self->delayed_send(self, check_every, tick_atom::value);
      },
  };
}

}  // namespace atl

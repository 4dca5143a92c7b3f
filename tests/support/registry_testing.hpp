#pragma once
// A registry's dependencies in a one-process tier (the protocol, hostile and seeded-fault
// tests): its transport and that transport's counters, its store, the head keeper's
// checkpoints and the directory of the head's actors.
#include <string>

#include "actors/registry/registry.hpp"

namespace atl::testing {

inline registry_deps in_process_registry(transport& net, registry_store& store, checkpoint_store& checkpoints,
                                         const directory& head, std::string endpoint) {
  registry_deps deps;
  deps.net = &net;
  deps.store = &store;
  deps.checkpoints = &checkpoints;
  deps.local_actors = &head;
  deps.counters = &net.counters();
  deps.listen_endpoint = std::move(endpoint);
  return deps;
}

}  // namespace atl::testing

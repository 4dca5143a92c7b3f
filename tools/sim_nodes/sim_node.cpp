#include "tools/sim_nodes/sim_node.hpp"

#include <caf/all.hpp>

#include "actors/node/node_agent.hpp"
#include "actors/shared/messages.hpp"
#include "tools/sim_nodes/standin_replica.hpp"

namespace atl::sim {

gated_links::gated_links(std::unique_ptr<node_links> links) : transport(&links->counters()), links_(std::move(links)) {}

void gated_links::send(const std::string& receiver, wire::frames frames) {
  std::lock_guard<std::mutex> lock(mu_);
  if (silent_ || closed_) return;
  links_->send(receiver, std::move(frames));
}

bool gated_links::delivers_in_process(const std::string& id) const { return links_->delivers_in_process(id); }

void gated_links::forget_peer(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) links_->forget_peer(id);
}

void gated_links::update_routes(const routes_update& update) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) links_->update_routes(update);
}

void gated_links::silence() {
  std::lock_guard<std::mutex> lock(mu_);
  silent_ = true;
}

void gated_links::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  links_->stop();  // closes the sockets: the head sees the connection drop
}

sim_node::sim_node(caf::actor_system& sys, sim_node_settings settings) {
  links_ = std::make_unique<gated_links>(std::make_unique<node_links>(settings.links, local_, cluster_));
  node_agent_config nc;
  nc.devices = {"cpu"};
  nc.hostname = settings.hostname;
  nc.factory = [values = settings.values, step_time = settings.step_time](const run_config& run,
                                                                          const replica_spec& spec) {
    return std::make_unique<standin_replica>(values, static_cast<std::size_t>(run.fragments), step_time, spec.rank);
  };
  gated_links* gate = links_.get();
  nc.on_routes = [gate, on_table = settings.on_table](const routes_update& update) {
    if (on_table) on_table(update);
    gate->update_routes(update);
  };
  agent_ = sys.spawn(node_agent_actor, static_cast<transport*>(links_.get()), &local_, &cluster_, nc);
}

sim_node::~sim_node() {
  close();
  caf::scoped_actor waiter{agent_.home_system()};
  waiter->wait_for(agent_);
}

void sim_node::silence() { links_->silence(); }

void sim_node::leave() { caf::anon_send(agent_, stop_atom::value); }

void sim_node::close() {
  links_->close();
  caf::anon_send(agent_, stop_atom::value);  // its actors stop; what they say is dropped
}

}  // namespace atl::sim

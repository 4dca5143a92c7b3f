// The registry's control commands and requests (actors/registry/control.hpp).
#include "actors/registry/control.hpp"

#include <cstdlib>
#include <filesystem>

#include <caf/all.hpp>

#include "actors/registry/lifecycle.hpp"
#include "actors/registry/views.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/json_text.hpp"
#include "runtime/process/log.hpp"
#include "runtime/transport/model_transfer.hpp"

namespace atl::registry_detail {
namespace {

using json = nlohmann::json;

void shut_down_cluster(self_ptr self) {
  stop_every_node(self, "atoll down");
  log_info("registry: shutting down on request");
  self->delayed_send(self, std::chrono::milliseconds(300), stop_atom::value);  // let replies flush
}

// "model": the run's model file for a joining node, described or one chunk of it
// (runtime/transport/model_transfer.hpp).
expected<json> model_answer(const registry_state& st, const std::string& argument, std::vector<wire::tensor>& out) {
  if (argument.empty()) {
    if (st.deps.model_file.empty()) return json{{"digest", ""}, {"bytes", 0}};
    std::error_code ec;
    const auto size = std::filesystem::file_size(st.deps.model_file, ec);
    if (ec) return make_error(errc::storage_failure, st.deps.model_file + ": " + ec.message());
    return json{{"digest", st.cfg.digest}, {"bytes", size}};
  }
  if (st.deps.model_file.empty()) return make_error(errc::bad_model, "this run has no model file");
  char* end = nullptr;
  const auto offset = std::strtoull(argument.c_str(), &end, 10);
  if (end == argument.c_str() || *end != '\0') return make_error(errc::invalid_config, "not an offset: " + argument);
  auto chunk = read_file_chunk(st.deps.model_file, offset, model_chunk_bytes);
  if (!chunk) return chunk.err();
  wire::tensor t;
  t.dtype = schema::DType::UINT8;
  t.shape = {chunk->size()};
  t.data = std::move(*chunk);
  out.push_back(std::move(t));
  return json{{"offset", offset}, {"bytes", out.back().data.size()}};
}

// `atoll leave N`: the reply body, or an error naming the problem.
expected<json> start_leave(self_ptr self, const std::string& argument) {
  auto& st = self->state;
  const auto id = parse_id_number(argument);
  if (!id) return make_error(errc::invalid_config, "leave: '" + argument + "' is not a node id (see atollctl members)");
  if (!st.nodes.count(*id)) return make_error(errc::unknown_peer, "leave: no node " + argument);
  if (auto err = drain_node(self, *id, "atoll leave")) return err;
  return json{{"node_id", *id}, {"state", "draining"}, {"handing_over", !st.nodes.at(*id).shutdown_sent}};
}

}  // namespace

std::pair<bool, std::string> answer(self_ptr self, const std::string& command, const std::string& argument,
                                    std::vector<wire::tensor>& tensors) {
  auto& st = self->state;
  // An unknown command answers its error text alone; a failed one, the error described.
  expected<json> body = json{{"error", "unknown command '" + command + "'"}};
  bool known = true;
  if (command == "status") body = views::status(st, st.now());
  else if (command == "ping") body = json{{"epoch", st.snap.epoch}, {"state", to_string(st.phase)}};  // the probes
  else if (command == "members") body = views::members(st, st.now(), argument);
  else if (command == "fragments") body = views::fragments(st, true);
  else if (command == "actors") body = views::actors(st);
  else if (command == "checkpoints") body = views::checkpoints(st);
  else if (command == "down") body = json{{"stopping", true}};
  else if (command == "leave") body = start_leave(self, argument);
  else if (command == "model") body = model_answer(st, argument, tensors);
  else if (command == "explain") body = views::explain(st, st.now(), argument);
  else if (command == "dashboard") body = views::dashboard(st, st.now(), argument);
  else if (command == "data") body = views::data(st);
  else known = false;
  return {known && body.has_value(), body ? json_text(*body) : json_text(json{{"error", body.err().describe()}})};
}

void on_control(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto request = msg->envelope().getControlRequest();
  const std::string command = request.getCommand();
  wire::outgoing out;
  const auto [ok, body] = answer(self, command, request.getArgument(), out.tensors);
  auto reply = out.envelope.initControlReply();
  reply.setOk(ok);
  reply.setJson(body);
  st.mail->send(msg->sender(), st.snap.epoch, out);
  if (command == "down") shut_down_cluster(self);
}

void on_membership_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto f = msg->envelope().getMembershipRequest().getFragment();
  if (f < st.fragments.size() && msg->sender() == coordinator_id(f)) st.fragments[f].confirmed = true;
  send_membership(self, msg->sender(), whole_membership(membership_of(st)));
  if (f < st.fragments.size() && msg->sender() == coordinator_id(f)) st.fragments[f].holds_membership = true;
}

}  // namespace atl::registry_detail

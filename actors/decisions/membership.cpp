#include "actors/decisions/membership.hpp"

namespace atl {
namespace {

error refused(member_state from, member_event event) {
  return make_error(errc::not_ready, std::string(to_string(event)) + " of a node that is " + to_string(from));
}

}  // namespace

bool takes_part(member_state s) {
  return s == member_state::joining || s == member_state::syncing || s == member_state::active;
}

bool hosts_placed(member_state s) { return takes_part(s) || s == member_state::draining; }

expected<member_state> next_state(member_state from, member_event event) {
  const bool gone = from == member_state::left || from == member_state::dead;
  switch (event) {
    case member_event::heartbeat:
      if (gone) return make_error(errc::stale_epoch, std::string("node is ") + to_string(from) + "; register again");
      return from == member_state::joining ? member_state::syncing : from;
    case member_event::synced:
      if (from == member_state::syncing) return member_state::active;
      break;
    case member_event::drain:
      if (takes_part(from)) return member_state::draining;
      break;
    case member_event::goodbye:
      if (hosts_placed(from)) return member_state::left;
      break;
    case member_event::lease_expired:
      if (from == member_state::draining) return member_state::left;
      if (takes_part(from)) return member_state::dead;
      break;
    case member_event::lease_expired_done:
      if (hosts_placed(from)) return member_state::left;
      break;
    case member_event::rejoin:
      // A live node that reconnects keeps its place; a gone or draining one starts over.
      return takes_part(from) ? from : member_state::joining;
  }
  return refused(from, event);
}

const char* to_string(member_state s) {
  switch (s) {
    case member_state::joining: return "joining";
    case member_state::syncing: return "syncing";
    case member_state::active: return "active";
    case member_state::draining: return "draining";
    case member_state::left: return "left";
    case member_state::dead: return "dead";
  }
  return "unknown";
}

const char* to_string(member_event e) {
  switch (e) {
    case member_event::heartbeat: return "heartbeat";
    case member_event::synced: return "synced";
    case member_event::drain: return "drain";
    case member_event::goodbye: return "goodbye";
    case member_event::lease_expired: return "lease_expired";
    case member_event::lease_expired_done: return "lease_expired_done";
    case member_event::rejoin: return "rejoin";
  }
  return "unknown";
}

const char* stored_member_state(member_state s) { return takes_part(s) ? "active" : to_string(s); }

expected<member_state> parse_stored_member_state(std::string_view text) {
  if (text == "active" || text == "joining" || text == "syncing") return member_state::joining;
  if (text == "draining") return member_state::draining;
  if (text == "left") return member_state::left;
  if (text == "dead") return member_state::dead;
  return make_error(errc::storage_failure, "unknown member state '" + std::string(text.substr(0, 32)) + "'");
}

const char* to_string(run_phase p) {
  switch (p) {
    case run_phase::waiting: return "waiting";
    case run_phase::training: return "training";
    case run_phase::finished: return "finished";
  }
  return "unknown";
}

expected<run_phase> parse_run_phase(std::string_view text) {
  if (text == "waiting") return run_phase::waiting;
  if (text == "training") return run_phase::training;
  if (text == "finished") return run_phase::finished;
  return make_error(errc::storage_failure, "unknown run state '" + std::string(text.substr(0, 32)) + "'");
}

expected<run_phase> next_phase(run_phase from, run_phase to) {
  if ((from == run_phase::waiting && to == run_phase::training) ||
      (from == run_phase::training && to == run_phase::finished))
    return to;
  return make_error(errc::unexpected_message,
                    std::string("run cannot go from ") + to_string(from) + " to " + to_string(to));
}

}  // namespace atl

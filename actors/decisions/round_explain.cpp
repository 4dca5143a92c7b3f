#include "actors/decisions/round_explain.hpp"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

namespace atl {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

std::string heartbeat(double ago) { return ago < 0 ? "no heartbeat yet" : "last heartbeat " + seconds(ago) + " ago"; }

std::string describe(const participant_facts& p) {
  return p.worker + " (node " + std::to_string(p.node_id) + ", " + p.node_state + ", " + heartbeat(p.last_heartbeat_s) +
         ", step " + std::to_string(p.step) + (p.done ? ", done" : "") + ")";
}

// What ends a collecting round's wait.
std::string collecting_rule(const explain_input& in, std::size_t participants, std::size_t contributed,
                            const std::vector<participant_facts>& missing) {
  std::string lease =
      "a participant whose node misses its lease (" + seconds(in.lease_s) + " without a heartbeat) is dropped";
  const participant_facts* quietest = nullptr;  // the missing participant whose node is silent longest
  for (const auto& m : missing)
    if (m.last_heartbeat_s >= 0 && (!quietest || m.last_heartbeat_s > quietest->last_heartbeat_s)) quietest = &m;
  if (quietest && quietest->last_heartbeat_s > 2.0)  // heartbeats come every second or so: silent
    lease += "; node " + std::to_string(quietest->node_id) + " has been silent " + seconds(quietest->last_heartbeat_s) +
             ", so " + quietest->worker + " goes in " + seconds(std::max(0.0, in.lease_s - quietest->last_heartbeat_s));
  const std::size_t needed = std::max(in.quorum, participants / 2 + 1);
  if (in.adaptive_close && contributed >= needed)
    return "a majority is in (" + std::to_string(contributed) + " of " + std::to_string(participants) +
           "): it closes without the rest once its adaptive grace passes (diloco.round_close = adaptive: the median "
           "arrival plus diloco.grace_k spreads)";
  const std::string adaptive = in.adaptive_close
                                   ? "its adaptive grace starts once " + std::to_string(needed) + " of " +
                                         std::to_string(participants) + " (a majority and the quorum) are in, it has " +
                                         std::to_string(contributed) + "; "
                                   : "";
  if (in.round_deadline_s <= 0)
    return adaptive + "it waits for every participant (diloco.round_deadline_ms = 0); " + lease;
  const double left = in.round_deadline_s - (in.progress ? in.progress->open_for_s : 0);
  std::string when = contributed == 0 ? "its deadline starts with the first contribution"
                                      : (left > 0 ? "its deadline is in " + seconds(left) : "its deadline has passed");
  if (contributed >= needed) return when + "; it then closes with the " + std::to_string(contributed) + " it has";
  return adaptive + when + "; it closes there only with " + std::to_string(needed) + " of " +
         std::to_string(participants) + " (a majority and the quorum), it has " + std::to_string(contributed) + "; " +
         lease;
}

}  // namespace

explanation explain_round(const explain_input& in) {
  explanation out;
  out.fragment = in.fragment;
  const std::string name = "fragment " + std::to_string(in.fragment);
  if (in.coordinator_on.empty()) {
    out.phase = "unplaced";
    out.waiting_for = "placement";
    out.text = name +
               " has no coordinator yet: the registry places one when training starts, or again after "
               "its node died";
    return out;
  }
  if (!in.progress || in.progress_age_s > in.stale_after_s) {
    out.phase = "silent";
    out.waiting_for = "coordinator";
    out.since_s = in.progress ? in.progress_age_s : 0;
    out.rule = "the coordinator is placed again when " + in.coordinator_on + " misses its lease (" +
               seconds(in.lease_s) + " without a heartbeat)";
    out.text = name + "'s coordinator on " + in.coordinator_on + " has " +
               (in.progress ? "not reported for " + seconds(in.progress_age_s) : std::string("not reported yet")) +
               "; the node is " + in.coordinator_node_state + ", " + heartbeat(in.coordinator_heartbeat_s) + ". " +
               out.rule;
    return out;
  }
  const auto& p = *in.progress;
  out.round = p.round;
  out.phase = p.phase;
  out.since_s = p.phase_for_s + in.progress_age_s;
  const std::string round = name + " round " + std::to_string(p.round);
  if (p.phase == "unseeded") {
    out.waiting_for = "seed";
    out.text = round +
               ": the coordinator waits for its state (a keeper's committed round, or the first worker's "
               "parameters) for " +
               seconds(out.since_s);
    return out;
  }
  if (p.phase == "ready") {
    out.waiting_for = "members";
    out.rule = "a round opens with at least " + std::to_string(in.quorum) + " workers in the membership";
    out.text = round + " has not opened for " + seconds(out.since_s) + ": " + out.rule;
    return out;
  }
  if (p.phase == "committing") {
    out.waiting_for = "keepers";
    for (const auto& k : p.keepers)
      if (std::find(p.acked.begin(), p.acked.end(), k) == p.acked.end())
        out.missing.push_back({k, 0, "", -1, 0, false});
    out.rule = "a commit is sent again, with back-off, until every keeper acknowledges it";
    std::string names;
    for (const auto& m : out.missing) names += (names.empty() ? "" : ", ") + m.worker;
    out.text = round + " is committing for " + seconds(out.since_s) + ", waiting for " +
               (names.empty() ? "nothing (releasing)" : names) + ". " + out.rule;
    return out;
  }
  out.waiting_for = "participants";
  out.contributed = p.contributors;
  // By name, not by scanning: a round of a thousand participants is asked about every second.
  std::unordered_map<std::string, const participant_facts*> facts;
  for (const auto& f : in.facts) facts.emplace(f.worker, &f);
  const std::unordered_set<std::string> contributed(p.contributors.begin(), p.contributors.end());
  for (const auto& worker : p.participants) {
    if (contributed.count(worker)) continue;
    const auto fact = facts.find(worker);
    out.missing.push_back(fact != facts.end() ? *fact->second : participant_facts{worker, 0, "unknown", -1, 0, false});
  }
  const auto still_missing = p.participant_count - std::min(p.participant_count, p.contributor_count);
  out.rule = collecting_rule(in, p.participant_count, p.contributor_count, out.missing);
  std::string who;
  for (std::size_t i = 0; i < out.missing.size() && i < named_in_text; ++i)
    who += (who.empty() ? "" : "; ") + describe(out.missing[i]);
  if (still_missing > named_in_text) who += " and " + std::to_string(still_missing - named_in_text) + " more";
  out.text = round + " has " + std::to_string(p.contributor_count) + " of " + std::to_string(p.participant_count) +
             " contributions" + (p.open_for_s > 0 ? " (first " + seconds(p.open_for_s) + " ago)" : "") +
             " and has waited " + seconds(out.since_s) + " for " + (who.empty() ? "nothing" : who) + ". " + out.rule +
             ".";
  return out;
}

}  // namespace atl

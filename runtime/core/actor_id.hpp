#pragma once
// Actor ids: the one home of their grammar. Every id in an envelope's sender or receiver
// is one of these; a string that is none of them is a typed error (errc::malformed_id).
//
//   registry                the head's membership authority
//   coord/F                 coordinator of fragment F
//   node/N                  node agent N (the registry's Welcome assigns N, from 1)
//   node/pending-TOKEN      a node agent before its Welcome
//   worker/N.K              worker K of node N: it lives on node/N (routes fall back there)
//   keeper/K                checkpoint keeper K: keeper/0 on the head, keeper/1 and /2 on nodes
//   ctl/TOKEN               an atollctl client (one request each)
//
// Numbers are decimal without leading zeros and fit in 32 bits; TOKEN is 1 to 48 of
// [A-Za-z0-9_.-]. So parse(format(id)) == id and format(parse(s)) == s for every valid s.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/core/expected.hpp"

namespace atl {

enum class actor_kind { registry, coordinator, node, pending_node, worker, keeper, control };

struct actor_id {
  actor_kind kind = actor_kind::registry;
  std::uint32_t number = 0;  // fragment (coord), node (node, worker) or keeper number
  std::uint32_t index = 0;  // K of worker/N.K
  std::string token;  // of node/pending-TOKEN and ctl/TOKEN

  std::string str() const;
  bool operator==(const actor_id& o) const {
    return kind == o.kind && number == o.number && index == o.index && token == o.token;
  }
};

// The id `text` names, or errc::malformed_id saying what is wrong.
expected<actor_id> parse_actor_id(std::string_view text);

// Formatting, one function per kind.
std::string registry_id();
std::string coordinator_id(std::uint32_t fragment);
std::string node_actor_id(std::uint32_t node);
std::string worker_id(std::uint32_t node, std::uint32_t index);
std::string keeper_id(std::uint32_t keeper);
std::string pending_node_id(std::string_view token);
std::string control_id(std::string_view token);

// A number as ids write it (decimal, no leading zero, 32 bits): user input such as the N
// of `atoll leave N`.
std::optional<std::uint32_t> parse_id_number(std::string_view digits);

// The head's keeper, on its run dir. Replicas on nodes start as keeper/1 and keeper/2 and
// take new numbers at each hand-over (storage/registry_store.hpp keeps them).
inline constexpr std::uint32_t head_keeper_number = 0;

// Questions the actors ask of untrusted ids: nullopt for a malformed id or another kind.
std::optional<std::uint32_t> fragment_of_coordinator(std::string_view id);  // coord/F -> F
std::optional<std::uint32_t> node_of(std::string_view id);  // node/N -> N
// The node an id lives on: node/N and worker/N.K -> N (a coordinator's or keeper's host is
// the registry's to know, not the id's).
std::optional<std::uint32_t> host_node_of(std::string_view id);
bool is_kind(std::string_view id, actor_kind kind);

}  // namespace atl

#pragma once
// Which committed fragment states make a whole model: the decisions behind `atoll export`
// and `atollctl checkpoints`. Pure functions over checkpoint_store::list(), of one keeper
// or of several together (the same round of a fragment held by two keepers counts once).
//
// Fragments have their own round counters (Streaming DiLoCo syncs them at staggered
// steps), so "round N" of the model is every fragment's round N, and the latest model
// is every fragment's latest round: the theta_global a joining worker would receive.
#include <optional>
#include <vector>

#include "storage/checkpoint_store.hpp"

namespace atl {

struct stored_round {
  std::uint64_t round = 0;
  std::vector<checkpoint_summary> fragments;  // those that hold this round, by fragment id
  bool complete = false;  // every one of the run's fragments holds it: `atoll export --round` can write it
};

// Every stored round number, oldest first.
std::vector<stored_round> rounds_by_number(const std::vector<checkpoint_summary>& stored, std::size_t fragment_count);

// What `atoll export` writes, one entry per fragment in fragment order: each fragment at
// `round`, or, without one, at its latest. errc::not_ready when a fragment has no
// committed round yet; errc::wrong_round when `round` is not stored for every fragment
// (the message lists the rounds that are).
expected<std::vector<checkpoint_summary>> choose_export(const std::vector<checkpoint_summary>& stored,
                                                        std::size_t fragment_count, std::optional<std::uint64_t> round);

}  // namespace atl

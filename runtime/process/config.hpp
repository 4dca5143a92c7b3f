#pragma once
// The run configuration and its knobs. Every tunable number of Atoll is a knob here:
// one table (knobs()) gives each its key, default, range and meaning; the TOML loader,
// the `--set key=value` overrides, `atoll config` and the README all read that table.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

struct run_config {
  // [run]
  std::string example = "shakespeare";
  std::string data_dir;  // empty: examples/data of the source tree this binary was built from
  std::string data;  // token file (`--data`); empty: the example's own data
  std::string data_format = "bytes";  // bytes (vocabulary 256) | u16 (little-endian uint16 token ids)
  std::int64_t vocab = 0;  // 0: 256 for bytes; for u16 the model's output width
  std::int64_t steps = 600;
  std::int64_t seed = 1;
  std::int64_t data_epochs = 0;  // passes the data cursor hands out; 0: no end (run.steps ends the run)
  bool data_cursor = true;  // workers train on chunks leased from the run's data cursor (token tasks)
  std::int64_t eval_every = 100;
  std::int64_t eval_batches = 16;
  std::int64_t min_workers = 2;
  std::int64_t log_every = 10;
  std::int64_t threads_per_worker = 0;
  std::string thread_layout = "auto";  // auto | TxB (runtime/core/thread_layout.hpp)
  std::string mode = "diloco";  // diloco | ddp (gradients averaged every step: the baseline)
  // [diloco]
  std::int64_t sync_every = 50;
  double sync_every_s = 0;  // > 0: time-boxed inner phases (runtime/algorithm/time_pacer.hpp)
  std::int64_t fragments = 1;
  // S: slices a fragment's round is reduced in (docs/design.md, "Sharded rounds"). 0 is
  // "auto", which the head turns into a number when it creates the run (auto_shards).
  std::int64_t shards = 0;
  std::string assignment = "strided";  // strided | sequential
  std::string weighting = "samples";  // samples | uniform (actors/decisions/contribution_weight.hpp)
  std::int64_t overlap = 0;
  double alpha = 0.0;
  bool carry_overlap = false;  // a merge keeps the tau steps trained since the contribution
  std::string codec = "fp32";  // fp32 | bf16 | fp16 | int8 | fp4 | topk16 | topk32 | topk64
  std::string result_codec = "same";  // the coordinator's results: "same" as codec, or a codec
  std::int64_t codec_chunk = 256;
  bool error_feedback = false;
  std::int64_t result_timeout_ms = 0;  // 0: 2 x cluster.lease_ms
  bool early_results = true;  // results travel while the round commits, applied once committed
  // What a round's durable record holds: "result", the change its contributors receive (the
  // outer state follows it: runtime/algorithm/outer_round.hpp), or "inputs", what it averaged.
  std::string round_record = "result";
  std::int64_t round_deadline_ms = 0;  // 0: no fixed deadline
  // all | adaptive: a majority's round closes once its grace passed (actors/decisions/quorum.hpp)
  std::string round_close = "all";
  // keep | drop: late work for a round that closed without its worker is folded into the next
  std::string late_work = "keep";
  double grace_k = 3;
  std::int64_t grace_min_ms = 200;
  std::int64_t grace_max_ms = 60000;
  std::int64_t state_chunk_values = 1 << 20;  // larger fragments go to joiners in chunks
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  // nesterov | sparseloco: plain SGD outer steps, the momentum in each worker's decayed
  // error feedback (runtime/algorithm/codec.hpp, error_feedback)
  std::string outer = "nesterov";
  double sparseloco_beta = 0.95;
  // [inner]
  double lr = 3e-3;
  double min_lr_ratio = 0.1;
  std::int64_t warmup_steps = 50;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  std::int64_t batch_size = 32;
  bool warm_start = true;  // a joiner takes a live peer's AdamW moments and step (actors/decisions/warm_start.hpp)
  // [model]
  std::string preset = "small";  // sets layers, width, heads and context when assigned (model_presets())
  std::int64_t layers = 4;
  std::int64_t width = 128;
  std::int64_t heads = 4;
  std::int64_t context = 64;
  std::string precision = "fp32";  // fp32 | bf16 (autocast on CUDA workers)
  std::string file;  // TorchScript model (`--model`), as the head stores it; empty: a built-in example
  std::string digest;  // digest64 (hex) of that file, set by the head; every node's copy must match
  // [cluster]
  std::int64_t heartbeat_ms = 1000;
  std::int64_t lease_ms = 20000;
  std::int64_t confirm_ms = 500;  // a node whose connection closed is dead unless it answers this soon; 0: lease only
  std::int64_t handover_ms = 60000;  // a leaving keeper host waits this long for its successor
  std::int64_t restart_limit = 3;
  std::int64_t restart_backoff_ms = 500;
  std::int64_t restart_window_ms = 60000;
  // [storage]
  std::int64_t keep_rounds = 5;
  std::string keepers = "nodes";  // nodes (two keepers on nodes; the head's out of the round path) | head
  std::string sync = "replicated";  // replicated | fsync (round records fdatasynced before the ack)
  std::int64_t snapshot_every = 10;  // rounds between a keeper's full snapshots of a fragment
  // [net]
  std::int64_t max_frame_mb = 1024;  // the head drops a peer that sends a bigger frame
};

struct knob {
  using field_t =
      std::variant<std::int64_t run_config::*, double run_config::*, std::string run_config::*, bool run_config::*>;
  const char* key;  // "diloco.sync_every": TOML table and key
  field_t field;
  double min;  // inclusive range for numbers; ignored for strings and booleans
  double max;
  const char* unit;  // "steps", "ms", "" ...
  const char* doc;
  // Strings: the allowed values, "a|b|c"; null = any. Integers: a word that stands for 0
  // ("auto"), or null.
  const char* choices = nullptr;
};

const std::vector<knob>& knobs();

// Loads a TOML file over the defaults. Unknown keys, wrong types and out-of-range values
// are refused with errc::invalid_config and a message naming the key.
expected<run_config> load_config_file(const std::string& path);
expected<run_config> parse_config_text(const std::string& toml_text, const std::string& origin);
// Applies "key=value" (key as in knobs(), e.g. "diloco.sync_every=25").
status apply_override(run_config& cfg, const std::string& assignment);
// The GPT sizes model.preset names (benchmarks use them; CI trains the small one).
struct model_preset {
  const char* name;
  std::int64_t layers, width, heads, context;
};
const std::vector<model_preset>& model_presets();

// Checks relations between knobs (width divisible by heads, lease above heartbeat ...).
status validate(const run_config& cfg);

// The outer step as the run's knobs choose it. SparseLoCo (diloco.outer = sparseloco)
// moves the momentum into each worker's error feedback, decayed by beta: the coordinators
// step theta -= outer_lr * average (Nesterov with momentum 0, bit for bit, so a round
// record and a keeper's replay need nothing new), and every worker feeds its residual back.
inline bool sparseloco_outer(const run_config& cfg) { return cfg.outer == "sparseloco"; }
inline double outer_momentum_of(const run_config& cfg) { return sparseloco_outer(cfg) ? 0.0 : cfg.outer_momentum; }
inline bool error_feedback_of(const run_config& cfg) { return cfg.error_feedback || sparseloco_outer(cfg); }
inline double feedback_decay_of(const run_config& cfg) { return sparseloco_outer(cfg) ? cfg.sparseloco_beta : 1.0; }

// The most sync units (fragments x shards, a coordinator each) a run may have.
inline constexpr std::int64_t max_sync_units = 4096;
// S as rounds use it: diloco.shards, where an "auto" no head has resolved (a config built
// in-process, as tests do) is the star, 1.
inline std::int64_t shards_of(const run_config& cfg) { return cfg.shards > 0 ? cfg.shards : 1; }
// The units rounds are run in: S slices of each of the P fragments, unit u = p * S + s,
// each with a coordinator, keepers and a round log of its own. With S = 1, the fragments.
inline std::int64_t sync_units(const run_config& cfg) { return cfg.fragments * shards_of(cfg); }
// The config as TOML text that parse_config_text() reads back identically.
std::string to_toml(const run_config& cfg);
// A table of all knobs with defaults and docs, for `atoll config`.
std::string describe_knobs();

}  // namespace atl

#include "runtime/process/config.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include <toml++/toml.h>

#include "runtime/algorithm/codec.hpp"
#include "runtime/core/model_signature.hpp"
#include "runtime/core/thread_layout.hpp"

namespace atl {

const std::vector<knob>& knobs() {
  using C = run_config;
  static const std::vector<knob> table = {
      {"run.example", &C::example, 0, 0, "", "registered task to train (shakespeare, mlp, ...)"},
      {"run.data_dir", &C::data_dir, 0, 0, "", "folder with the example's data; empty = the copy in examples/data"},
      {"run.data", &C::data, 0, 0, "",
       "token file to train on (memory-mapped; the last 10% is held out); empty = the example's own data"},
      {"run.data_format", &C::data_format, 0, 0, "",
       "bytes: one token per byte (vocabulary 256); u16: little-endian uint16 token ids (nanoGPT's .bin)", "bytes|u16"},
      {"run.vocab", &C::vocab, 0, 65536, "tokens",
       "vocabulary size; 0 = 256 for bytes, the model's output width for u16 (required for u16 with the built-in "
       "GPT)"},
      {"run.steps", &C::steps, 1, 1e9, "steps", "inner steps each worker trains"},
      {"run.seed", &C::seed, 0, 1e15, "", "seed of model init and data order"},
      {"run.data_cursor", &C::data_cursor, 0, 0, "",
       "workers of a token task (shakespeare, --data) train on chunks of the data leased from the run's cursor, "
       "each unit learned once per epoch by the committed model (docs/design.md, \"Every sample once\"); false: "
       "each samples windows of its shard, rank of world. Tasks with their own data (mlp, your loop) and run.mode = "
       "ddp always sample"},
      {"run.data_epochs", &C::data_epochs, 0, 1e9, "epochs",
       "passes over the data the run's data cursor leases out (docs/design.md, \"Every sample once\"); 0 = no end: "
       "run.steps ends the run"},
      {"run.eval_every", &C::eval_every, 1, 1e9, "steps", "held-out eval of theta_global every E steps"},
      {"run.eval_batches", &C::eval_batches, 1, 1e6, "batches", "batches per held-out eval"},
      {"run.min_workers", &C::min_workers, 1, 4096, "workers", "workers that must register before training starts"},
      {"run.log_every", &C::log_every, 1, 1e9, "steps", "progress report interval"},
      {"run.threads_per_worker", &C::threads_per_worker, 0, 1024, "threads",
       "cores each CPU worker computes on (LibTorch intra-op threads and the BLAS pool); 0 = cores / local "
       "workers"},
      {"run.thread_layout", &C::thread_layout, 0, 0, "",
       "how a CPU worker splits its cores: TxB (LibTorch intra-op threads x BLAS threads, e.g. 1x2), or auto: "
       "a worker alone in its process tries TxT, 1xT, Tx1 and 1x1 over its first steps and keeps the fastest"},
      {"run.mode", &C::mode, 0, 0, "", "diloco, or ddp: gradients averaged every step (the baseline)", "diloco|ddp"},
      {"diloco.sync_every", &C::sync_every, 1, 1e9, "steps", "H: inner steps per outer round of a fragment"},
      {"diloco.sync_every_s", &C::sync_every_s, 0, 1e6, "s",
       "time-boxed inner phases: a fragment syncs every this many seconds of training, however many inner steps "
       "a worker took (0: every diloco.sync_every steps). The schedule's steps (run.steps, diloco.overlap, "
       "inner.warmup_steps, run.eval_every) are then ticks of sync_every_s / sync_every seconds"},
      {"diloco.fragments", &C::fragments, 1, 1024, "", "P: parameter fragments synced separately"},
      {"diloco.shards", &C::shards, 0, 64, "",
       "S: slices each fragment's round is reduced in, each by a coordinator of its own on its own node while "
       "there are nodes enough (1: one coordinator a fragment); every fragment needs S blocks of 16 Ki values. "
       "auto: the head chooses when it creates the run, min(run.min_workers, 8, the blocks of the smallest "
       "fragment); 1 for run.example = external and run.mode = ddp",
       "auto"},
      {"diloco.assignment", &C::assignment, 0, 0, "",
       "layer groups to fragments: strided (group g -> g mod P) or sequential (contiguous runs)", "strided|sequential"},
      {"diloco.weighting", &C::weighting, 0, 0, "",
       "how a round averages its contributions: samples (each weighted by the samples its worker trained since "
       "its last sync of the fragment: more steps or larger batches count for more) or uniform (each alike)",
       "samples|uniform"},
      {"diloco.overlap", &C::overlap, 0, 1e9, "steps", "tau: steps a worker trains on before merging a result"},
      {"diloco.alpha", &C::alpha, 0, 1, "", "merge: local = alpha * local + (1 - alpha) * global"},
      {"diloco.carry_overlap", &C::carry_overlap, 0, 0, "",
       "with diloco.overlap: the merge keeps what the worker trained in the tau steps since it contributed, "
       "local = alpha x local + (1 - alpha) x (global + local - local at the contribution); false: those steps' "
       "share (1 - alpha) is dropped (runtime/algorithm/overlap_merge.hpp)"},
      {"diloco.codec", &C::codec, 0, 0, "",
       "pseudo-gradient encoding on the wire, both ways; topkD sends the largest 1/D of each chunk, 4 bits and a "
       "position each "
       "(use error feedback with it)",
       "fp32|bf16|fp16|int8|fp4|topk16|topk32|topk64"},
      {"diloco.result_codec", &C::result_codec, 0, 0, "",
       "the encoding of the coordinators' results (the round's change of theta_global): same as diloco.codec, or "
       "another, e.g. a denser sparse one, since the average of M sparse contributions holds up to M times the "
       "values",
       "same|fp32|bf16|fp16|int8|fp4|topk16|topk32|topk64"},
      {"diloco.codec_chunk", &C::codec_chunk, 8, 1 << 24, "values", "values sharing one scale (int8, fp4)"},
      {"diloco.error_feedback", &C::error_feedback, 0, 0, "",
       "add what quantization lost to the next contribution of the fragment"},
      {"diloco.early_results", &C::early_results, 0, 0, "",
       "send a round's result once every keeper has its commit, while they write it, and a confirmation once "
       "they all acknowledged it (workers apply it then); false: the result goes out after the commit"},
      {"diloco.round_record", &C::round_record, 0, 0, "",
       "what a round's durable record at the keepers holds, with low-bit results: result, the encoded change every "
       "contributor receives (the outer momentum follows it; the record is the result's size whatever the number "
       "of workers), or inputs, the contributions as received or their fp32 average (the momentum from the exact "
       "average; the record grows with the workers up to 4 bytes a value)",
       "result|inputs"},
      {"diloco.result_timeout_ms", &C::result_timeout_ms, 0, 3.6e6, "ms",
       "a worker waiting this long for a round's result sends its contribution again (0: 2 x cluster.lease_ms)"},
      {"diloco.round_deadline_ms", &C::round_deadline_ms, 0, 3.6e6, "ms",
       "a round open this long after its first contribution closes with the contributions it has, if they "
       "are a quorum and a majority of its participants (0: no fixed deadline)"},
      {"diloco.round_close", &C::round_close, 0, 0, "",
       "when a round closes without every participant: all (it waits for each, or diloco.round_deadline_ms) | "
       "adaptive (once a quorum and a majority contributed and a grace has passed: the median arrival plus "
       "diloco.grace_k times the median absolute deviation of the arrivals, within [grace_min_ms, "
       "grace_max_ms]; a participant left out sends its work late: diloco.late_work)",
       "all|adaptive"},
      {"diloco.late_work", &C::late_work, 0, 0, "",
       "a contribution to a round that closed without its worker (deadline or grace): keep (folded into the "
       "next round at half its weight; the worker merges the result it missed) | drop (refused; the worker "
       "resyncs and loses what it trained since its last sync)",
       "keep|drop"},
      {"diloco.grace_k", &C::grace_k, 0, 100, "MADs", "the adaptive grace: spreads waited past the median arrival"},
      {"diloco.grace_min_ms", &C::grace_min_ms, 0, 3.6e6, "ms", "the adaptive grace is at least this long"},
      {"diloco.grace_max_ms", &C::grace_max_ms, 0, 3.6e6, "ms", "the adaptive grace is at most this long"},
      {"diloco.state_chunk_values", &C::state_chunk_values, 1, 1 << 24, "values",
       "a fragment larger than this reaches a resyncing worker in chunks of this many values, from the keepers"},
      {"diloco.outer_lr", &C::outer_lr, 0, 10, "", "outer Nesterov SGD learning rate"},
      {"diloco.outer_momentum", &C::outer_momentum, 0, 0.999999, "", "outer Nesterov momentum (nesterov only)"},
      {"diloco.outer", &C::outer, 0, 0, "",
       "the outer optimizer: nesterov (SGD with Nesterov momentum on the averaged pseudo-gradient) | sparseloco "
       "(SparseLoCo: no outer momentum, theta -= outer_lr x average; each worker keeps error feedback decayed by "
       "diloco.sparseloco_beta, which stands in for it; the paper runs outer_lr 1, alpha 0 and topk32 or topk64)",
       "nesterov|sparseloco"},
      {"diloco.sparseloco_beta", &C::sparseloco_beta, 0, 1, "",
       "sparseloco: the decay of each worker's error-feedback accumulator, e = beta x e + pseudo-gradient"},
      {"inner.lr", &C::lr, 0, 10, "", "peak AdamW learning rate"},
      {"inner.min_lr_ratio", &C::min_lr_ratio, 0, 1, "", "cosine decay floor, as a fraction of lr"},
      {"inner.warmup_steps", &C::warmup_steps, 0, 1e9, "steps", "linear warm-up of the inner lr"},
      {"inner.weight_decay", &C::weight_decay, 0, 10, "", "AdamW decoupled weight decay"},
      {"inner.grad_clip", &C::grad_clip, 0, 1e9, "", "max global gradient norm; 0 disables clipping"},
      {"inner.batch_size", &C::batch_size, 1, 1e6, "sequences", "sequences per inner step"},
      {"inner.warm_start", &C::warm_start, 0, 0, "",
       "a worker that joins a run in progress (or restarts) takes a live peer's inner-optimizer state (AdamW's "
       "moments and step), chunked and digest-checked; false, or no peer can give it: fresh state"},
      {"model.preset", &C::preset, 0, 0, "",
       "GPT size: small (0.83M parameters), 25m (25.4M) or 100m (99.6M); sets model.layers, width, heads and "
       "context, which a later --set (or the same file) may still change",
       "small|25m|100m"},
      {"model.layers", &C::layers, 1, 1024, "", "transformer blocks"},
      {"model.width", &C::width, 1, 1 << 24, "", "embedding width (mlp: hidden units)"},
      {"model.heads", &C::heads, 1, 1024, "", "attention heads (divides width)"},
      {"model.context", &C::context, 2, 65536, "tokens", "context length"},
      {"model.precision", &C::precision, 0, 0, "",
       "forward arithmetic of CUDA workers: bf16 autocast keeps parameters, optimizer state and the sync in "
       "fp32; CPU workers always compute in fp32",
       "fp32|bf16"},
      {"model.file", &C::file, 0, 0, "",
       "TorchScript model to train (`atoll local|up --model`); the head keeps a copy in its run dir and sends it "
       "to joining nodes"},
      {"model.digest", &C::digest, 0, 0, "",
       "digest of model.file, set by the head; a node whose copy differs is refused"},
      {"cluster.heartbeat_ms", &C::heartbeat_ms, 10, 3.6e6, "ms", "node heartbeat interval"},
      {"cluster.lease_ms", &C::lease_ms, 100, 3.6e6, "ms", "a node without heartbeat this long is dead"},
      {"cluster.confirm_ms", &C::confirm_ms, 0, 3.6e6, "ms",
       "a node whose connection to the head closed (a killed process) is dead unless it answers the head this "
       "soon (0: only the lease sees deaths)"},
      {"cluster.handover_ms", &C::handover_ms, 100, 8.64e7, "ms",
       "a node that leaves (atoll leave, SIGTERM) while it hosts a keeper replica waits at most this long for a "
       "new replica on another node to catch up, then leaves anyway"},
      {"cluster.restart_limit", &C::restart_limit, 0, 1000, "restarts",
       "worker restarts within cluster.restart_window_ms before its node gives up"},
      {"cluster.restart_window_ms", &C::restart_window_ms, 1, 8.64e7, "ms",
       "restarts older than this are forgiven (R restarts in T)"},
      {"cluster.restart_backoff_ms", &C::restart_backoff_ms, 0, 3.6e6, "ms",
       "first restart delay, doubled for each restart in the window (at most 30 s)"},
      {"storage.keep_rounds", &C::keep_rounds, 1, 1e6, "rounds",
       "committed rounds kept readable per fragment (the snapshot before the oldest and the round log after it; a "
       "keeper also holds one spare file per fragment and kind, which its next write overwrites)"},
      {"storage.sync", &C::sync, 0, 0, "",
       "when a keeper acknowledges a round record: replicated (in its write-ahead log, not fdatasynced: two keepers "
       "on two nodes survive the loss of either) or fsync (fdatasynced first)",
       "replicated|fsync"},
      {"storage.snapshot_every", &C::snapshot_every, 1, 1e6, "rounds",
       "rounds between a keeper's full fp32 snapshots of a fragment (theta, momentum, residual); reads replay the "
       "round log since the last one"},
      {"storage.keepers", &C::keepers, 0, 0, "",
       "where every commit goes: nodes (two replicas on two nodes that have a run dir, so no tensor crosses the "
       "head's link; the head's keeper stands in while fewer than two nodes can keep; a leaving node hands its "
       "replica over first), or head (the head's keeper and a replica on a node)",
       "nodes|head"},
      {"net.max_frame_mb", &C::max_frame_mb, 1, 4096, "MiB",
       "largest frame the head accepts (a tensor of a fragment); a peer sending more is disconnected"},
  };
  return table;
}

const std::vector<model_preset>& model_presets() {
  // Parameters of the shakespeare GPT (tied embedding, vocabulary 256): 12 W^2 + 13 W per
  // block, plus (256 + context) W + 2 W.
  static const std::vector<model_preset> table = {
      {"small", 4, 128, 4, 64},  // 834,304
      {"25m", 8, 512, 8, 128},  // 25,416,704
      {"100m", 14, 768, 12, 256},  // 99,624,960
  };
  return table;
}

namespace {

void apply_model_preset(run_config& cfg) {
  for (const auto& p : model_presets()) {
    if (cfg.preset != p.name) continue;
    cfg.layers = p.layers;
    cfg.width = p.width;
    cfg.heads = p.heads;
    cfg.context = p.context;
  }
}

const knob* find_knob(const std::string& key) {
  for (const auto& k : knobs())
    if (key == k.key) return &k;
  return nullptr;
}

error bad(const std::string& origin, const std::string& key, const std::string& what) {
  return make_error(errc::invalid_config, origin + ": " + key + ": " + what);
}

bool is_choice(const std::string& value, const std::string& choices) {
  std::size_t start = 0;
  while (start <= choices.size()) {
    const auto end = std::min(choices.find('|', start), choices.size());
    if (choices.compare(start, end - start, value) == 0 && end - start == value.size()) return true;
    start = end + 1;
  }
  return false;
}

std::string range_text(const knob& k) {
  std::ostringstream os;
  os << "[" << k.min << ", " << k.max << "]";
  return os.str();
}

// Assigns one TOML value to its knob after type and range checks.
status assign(run_config& cfg, const knob& k, const toml::node& value, const std::string& origin) {
  return std::visit(
      [&](auto member) -> status {
        using T = std::remove_reference_t<decltype(cfg.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          auto v = value.value<std::string>();
          if (!value.is_string() || !v) return bad(origin, k.key, "expected a string");
          if (k.choices && !is_choice(*v, k.choices))
            return bad(origin, k.key, "'" + *v + "' is not one of " + k.choices);
          cfg.*member = *v;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!value.is_boolean()) return bad(origin, k.key, "expected true or false");
          cfg.*member = *value.value<bool>();
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          if (k.choices && value.is_string() && value.value<std::string>() == std::string(k.choices)) {
            cfg.*member = 0;  // the word standing for 0 ("auto")
            return {};
          }
          if (!value.is_integer())
            return bad(origin, k.key,
                       k.choices ? "expected an integer or \"" + std::string(k.choices) + "\"" : "expected an integer");
          auto v = *value.value<std::int64_t>();
          if (v < k.min || v > k.max) return bad(origin, k.key, std::to_string(v) + " is outside " + range_text(k));
          cfg.*member = v;
        } else {
          if (!value.is_number()) return bad(origin, k.key, "expected a number");
          auto v = *value.value<double>();
          if (!std::isfinite(v) || v < k.min || v > k.max)
            return bad(origin, k.key, std::to_string(v) + " is outside " + range_text(k));
          cfg.*member = v;
        }
        return {};
      },
      k.field);
}

// A knob assigned, and what it implies: a preset sets the model's shape.
status assign_and_apply(run_config& cfg, const knob& k, const toml::node& value, const std::string& origin) {
  if (auto st = assign(cfg, k, value, origin)) return st;
  if (std::string_view(k.key) == "model.preset") apply_model_preset(cfg);
  return {};
}

status apply_table(run_config& cfg, const toml::table& root, const std::string& origin) {
  // The preset first: the file's own model.* keys then refine it, whatever their order.
  if (const auto* preset = root.at_path("model.preset").node())
    if (auto st = assign_and_apply(cfg, *find_knob("model.preset"), *preset, origin)) return st;
  for (const auto& [section, node] : root) {
    const std::string section_name(section.str());
    const auto* table = node.as_table();
    if (!table) return bad(origin, section_name, "unknown top-level key (expected a [section])");
    for (const auto& [key, value] : *table) {
      const std::string full = section_name + "." + std::string(key.str());
      const knob* k = find_knob(full);
      if (!k) return bad(origin, full, "unknown key (see `atoll config`)");
      if (full == "model.preset") continue;  // applied above
      if (auto st = assign(cfg, *k, value, origin)) return st;
    }
  }
  return validate(cfg);
}

}  // namespace

expected<run_config> parse_config_text(const std::string& text, const std::string& origin) {
  run_config cfg;
  try {
    auto root = toml::parse(text, origin);
    if (auto st = apply_table(cfg, root, origin)) return st;
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ": " << e.description();
    return make_error(errc::invalid_config, os.str());
  }
  return cfg;
}

expected<run_config> load_config_file(const std::string& path) {
  try {
    auto root = toml::parse_file(path);
    run_config cfg;
    if (auto st = apply_table(cfg, root, path)) return st;
    return cfg;
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << path << ":" << e.source().begin.line << ": " << e.description();
    return make_error(errc::invalid_config, os.str());
  }
}

status apply_override(run_config& cfg, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return make_error(errc::invalid_config, "--set " + assignment + ": expected key=value");
  const std::string key = assignment.substr(0, eq);
  const std::string raw = assignment.substr(eq + 1);
  const knob* k = find_knob(key);
  if (!k) return make_error(errc::invalid_config, "--set " + key + ": unknown key (see `atoll config`)");
  // Reuse the TOML type rules: strings are quoted unless already quoted.
  const bool is_string = std::holds_alternative<std::string run_config::*>(k->field) ||
                         (k->choices && raw == k->choices);  // an integer's word ("auto")
  std::string literal = is_string && (raw.empty() || raw.front() != '"') ? "\"" + raw + "\"" : raw;
  try {
    auto parsed = toml::parse("v = " + literal);
    if (auto st = assign_and_apply(cfg, *k, *parsed.get("v"), "--set")) return st;
  } catch (const toml::parse_error&) {
    return make_error(errc::invalid_config, "--set " + key + ": '" + raw + "' is not a valid value");
  }
  return validate(cfg);
}

status validate(const run_config& cfg) {
  if (cfg.width % cfg.heads != 0)
    return make_error(errc::invalid_config, "model.heads: " + std::to_string(cfg.heads) +
                                                " does not divide model.width " + std::to_string(cfg.width));
  if (cfg.lease_ms < 3 * cfg.heartbeat_ms)
    return make_error(errc::invalid_config, "cluster.lease_ms: must be at least 3 x cluster.heartbeat_ms");
  if (cfg.confirm_ms >= cfg.lease_ms)
    return make_error(errc::invalid_config, "cluster.confirm_ms: must be shorter than cluster.lease_ms (" +
                                                std::to_string(cfg.lease_ms) + ")");
  if (cfg.overlap >= cfg.sync_every)
    return make_error(errc::invalid_config, "diloco.overlap: must be smaller than diloco.sync_every (" +
                                                std::to_string(cfg.sync_every) + ")");
  if (cfg.sync_every_s > 0 && cfg.mode == "ddp")
    return make_error(errc::invalid_config, "diloco.sync_every_s: run.mode = ddp averages every step (0 there)");
  if (sparseloco_outer(cfg) && cfg.mode == "ddp")
    return make_error(errc::invalid_config, "diloco.outer: run.mode = ddp has no outer step (nesterov there)");
  if (cfg.grace_min_ms > cfg.grace_max_ms)
    return make_error(errc::invalid_config, "diloco.grace_min_ms: must not exceed diloco.grace_max_ms (" +
                                                std::to_string(cfg.grace_max_ms) + ")");
  if (cfg.example.empty()) return make_error(errc::invalid_config, "run.example: must not be empty");
  if (cfg.example == external_example && cfg.mode == "ddp")
    return make_error(errc::invalid_config,
                      "run.example = external trains DiLoCo or Streaming DiLoCo; run.mode = ddp needs a built-in "
                      "or TorchScript model");
  if (cfg.shards > 1 && cfg.mode == "ddp")
    return make_error(errc::invalid_config, "diloco.shards: run.mode = ddp averages whole fragments (shards = 1)");
  if (cfg.fragments * cfg.shards > max_sync_units)
    return make_error(errc::invalid_config, "diloco.shards: " + std::to_string(cfg.fragments) + " fragments x " +
                                                std::to_string(cfg.shards) + " shards is more than " +
                                                std::to_string(max_sync_units) + " coordinators");
  for (const auto* name : {&cfg.codec, &cfg.result_codec}) {
    if (const auto codec = parse_codec(*name);
        codec && is_sparse(*codec) && static_cast<std::size_t>(cfg.codec_chunk) > max_sparse_chunk)
      return make_error(errc::invalid_config, "diloco.codec_chunk: " + std::to_string(cfg.codec_chunk) +
                                                  " is more than the " + std::to_string(max_sparse_chunk) +
                                                  " values a sparse codec's chunk can hold (" + *name + ")");
  }
  if (cfg.thread_layout != "auto") {
    if (const auto layout = parse_thread_layout(cfg.thread_layout); !layout)
      return make_error(errc::invalid_config, "run.thread_layout: " + layout.err().message);
  }
  if (cfg.data_format == "bytes" && cfg.vocab > 256)
    return make_error(errc::invalid_config,
                      "run.vocab: " + std::to_string(cfg.vocab) +
                          " is more than the 256 tokens a byte can hold (run.data_format = bytes)");
  return {};
}

std::string to_toml(const run_config& cfg) {
  std::map<std::string, toml::table> sections;
  for (const auto& k : knobs()) {
    const std::string key = k.key;
    const auto dot = key.find('.');
    auto& t = sections[key.substr(0, dot)];
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(cfg.*member)>;  // cfg is const here
          if constexpr (std::is_same_v<T, std::int64_t>)
            if (k.choices && cfg.*member == 0) return void(t.insert_or_assign(key.substr(dot + 1), k.choices));
          t.insert_or_assign(key.substr(dot + 1), cfg.*member);
        },
        k.field);
  }
  toml::table root;
  for (auto& [name, table] : sections) root.insert_or_assign(name, std::move(table));
  std::ostringstream os;
  os << root;
  return os.str();
}

std::string describe_knobs() {
  std::ostringstream os;
  run_config defaults;
  for (const auto& k : knobs()) {
    os << k.key << " = ";
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(defaults.*member)>;
          if constexpr (std::is_same_v<T, std::string>) os << '"' << defaults.*member << '"';
          else if constexpr (std::is_same_v<T, std::int64_t>) {
            if (k.choices && defaults.*member == 0) os << '"' << k.choices << '"';
            else os << defaults.*member;
          } else os << std::boolalpha << defaults.*member;
        },
        k.field);
    if (*k.unit) os << "  [" << k.unit << "]";
    os << "\n    " << k.doc;
    if (k.choices && std::holds_alternative<std::string run_config::*>(k.field)) os << " (" << k.choices << ")";
    os << "\n";
  }
  return os.str();
}

}  // namespace atl

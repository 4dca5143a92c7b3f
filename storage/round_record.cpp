#include "storage/round_record.hpp"

#include <cstring>

#include "runtime/core/digest.hpp"
#include "storage/binary_fields.hpp"

namespace atl {
namespace {

constexpr char magic[4] = {'A', 'T', 'R', 'L'};
constexpr std::uint32_t version = 1;
// Inputs a record may name: more contributors than any run has workers, and a bound on
// what a corrupt count can make decode allocate.
constexpr std::uint32_t max_inputs = 1 << 16;
constexpr std::uint32_t max_worker_name = 256;

using binary_fields::put;
using binary_fields::take;

std::size_t expected_scales(codec_kind kind, std::uint64_t count, std::uint32_t chunk) {
  return scale_count(kind, count, chunk) * sizeof(float);  // 0 for a codec without scales
}

}  // namespace

const char* to_string(record_form form) {
  switch (form) {
    case record_form::inputs: return "inputs";
    case record_form::average: return "average";
    case record_form::result: return "result";
  }
  return "?";
}

std::uint64_t round_record::input_bytes() const {
  std::uint64_t total = 0;
  for (const auto& in : inputs) total += in.payload.size() + in.scales.size();
  return total;
}

bool log_the_average(std::uint64_t contribution_bytes, std::uint64_t count) {
  return contribution_bytes > count * sizeof(float);
}

status check_record(const round_record& r) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::tensor_mismatch, "round record of fragment " + std::to_string(r.fragment) + " round " +
                                                 std::to_string(r.round) + ": " + why);
  };
  if (r.inputs.empty()) return bad("no inputs");
  if (r.inputs.size() > max_inputs) return bad(std::to_string(r.inputs.size()) + " inputs");
  if (r.form > record_form::result) return bad("unknown form");
  if (r.form == record_form::average && (r.inputs.size() != 1 || r.inputs[0].codec != codec_kind::fp32))
    return bad("an averaged record has one fp32 input");
  if (r.rule.result_codec > last_codec) return bad("unknown result codec");
  if (r.form == record_form::result) {
    if (r.inputs.size() != 1) return bad("a result record has one input");
    const auto& in = r.inputs[0];
    if (r.rule.result_codec == codec_kind::fp32 || in.codec != r.rule.result_codec)
      return bad(std::string("a result record in ") + to_string(in.codec) + " for results in " +
                 to_string(r.rule.result_codec));
    if (has_scales(in.codec) && in.chunk != r.rule.result_chunk)
      return bad("a result record's chunk is not the rule's");
  }
  for (const auto& in : r.inputs) {
    if (in.codec > last_codec) return bad("unknown codec of " + in.worker);
    if (in.worker.size() > max_worker_name)
      return bad("a worker name of " + std::to_string(in.worker.size()) + " bytes");
    const bool scaled = has_scales(in.codec);
    if (scaled && in.chunk == 0) return bad(in.worker + "'s chunk is 0");
    if (is_sparse(in.codec) && in.chunk > max_sparse_chunk) return bad(in.worker + "'s sparse chunk is over 256");
    if (in.payload.size() != payload_bytes(in.codec, r.count, in.chunk))
      return bad(std::string(to_string(in.codec)) + " input of " + in.worker + " has " +
                 std::to_string(in.payload.size()) + " bytes for " + std::to_string(r.count) + " values");
    if (in.scales.size() != expected_scales(in.codec, r.count, in.chunk))
      return bad(in.worker + "'s scales have " + std::to_string(in.scales.size()) + " bytes");
  }
  return {};
}

encoded_record::encoded_record(const round_record& r) {
  header_.append(magic, 4);
  put(header_, version);
  put(header_, r.fragment);
  put(header_, r.round);
  put(header_, r.epoch);
  put(header_, r.count);
  put(header_, r.theta_digest);
  put(header_, r.rule.outer.lr);
  put(header_, r.rule.outer.momentum);
  put(header_, static_cast<std::uint8_t>(r.rule.result_codec));
  put(header_, static_cast<std::uint32_t>(r.rule.result_chunk));
  put(header_, static_cast<std::uint8_t>(r.form));
  put(header_, static_cast<std::uint32_t>(r.inputs.size()));
  for (const auto& in : r.inputs) {
    put(header_, static_cast<std::uint32_t>(in.worker.size()));
    header_.append(in.worker);
    put(header_, in.weight);
    put(header_, static_cast<std::uint8_t>(in.codec));
    put(header_, in.chunk);
    put(header_, static_cast<std::uint64_t>(in.payload.size()));
    put(header_, static_cast<std::uint64_t>(in.scales.size()));
  }
  pieces_.push_back({header_.data(), header_.size()});
  for (const auto& in : r.inputs) {
    pieces_.push_back({in.payload.data(), in.payload.size()});
    pieces_.push_back({in.scales.data(), in.scales.size()});
  }
  digest_stream d;
  for (const auto& p : pieces_) d.update(p.data, p.size);
  checksum_ = d.finish();
  pieces_.push_back({&checksum_, sizeof checksum_});
}

std::string encoded_record::joined() const {
  std::string out;
  for (const auto& p : pieces_) out.append(static_cast<const char*>(p.data), p.size);
  return out;
}

expected<round_record> decode_record(const std::string& in) {
  auto corrupt = [](const std::string& why) {
    return make_error(errc::storage_failure, "corrupt round record: " + why);
  };
  if (in.size() < 4 + sizeof(std::uint64_t) || std::memcmp(in.data(), magic, 4) != 0) return corrupt("bad magic");
  std::uint64_t stored = 0;
  std::memcpy(&stored, in.data() + in.size() - sizeof stored, sizeof stored);
  if (digest64(in.data(), in.size() - sizeof stored) != stored)
    return make_error(errc::checksum_mismatch, "round record: the checksum does not match its bytes");
  const std::size_t end = in.size() - sizeof stored;
  round_record r;
  std::size_t pos = 4;
  std::uint32_t v = 0, result_chunk = 0, inputs = 0;
  std::uint8_t result_codec = 0, form = 0;
  if (!take(in, pos, v) || v != version) return corrupt("unknown version");
  if (!take(in, pos, r.fragment) || !take(in, pos, r.round) || !take(in, pos, r.epoch) || !take(in, pos, r.count) ||
      !take(in, pos, r.theta_digest) || !take(in, pos, r.rule.outer.lr) || !take(in, pos, r.rule.outer.momentum) ||
      !take(in, pos, result_codec) || !take(in, pos, result_chunk) || !take(in, pos, form) || !take(in, pos, inputs))
    return corrupt("truncated header");
  // take() reads up to the string's end, which holds the checksum: a header that reaches
  // into it is cut short (and would make the sizes below wrap around).
  if (pos > end) return corrupt("truncated header");
  if (inputs > max_inputs) return corrupt(std::to_string(inputs) + " inputs");
  if (form > static_cast<std::uint8_t>(record_form::result)) return corrupt("unknown form " + std::to_string(form));
  r.rule.result_codec = static_cast<codec_kind>(result_codec);
  r.rule.result_chunk = result_chunk;
  r.form = static_cast<record_form>(form);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sizes;
  for (std::uint32_t i = 0; i < inputs; ++i) {
    round_input ri;
    std::uint32_t name = 0;
    std::uint8_t codec = 0;
    std::uint64_t payload = 0, scales = 0;
    if (!take(in, pos, name) || name > max_worker_name || pos + name > end) return corrupt("truncated input name");
    ri.worker.assign(in.data() + pos, name);
    pos += name;
    if (!take(in, pos, ri.weight) || !take(in, pos, codec) || !take(in, pos, ri.chunk) || !take(in, pos, payload) ||
        !take(in, pos, scales))
      return corrupt("truncated input header");
    if (pos > end) return corrupt("truncated input header");
    ri.codec = static_cast<codec_kind>(codec);
    sizes.emplace_back(payload, scales);
    r.inputs.push_back(std::move(ri));
  }
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    const auto [payload, scales] = sizes[i];
    if (payload > end - pos || scales > end - pos - payload) return corrupt("sizes do not add up");
    const auto* at = reinterpret_cast<const std::uint8_t*>(in.data()) + pos;
    r.inputs[i].payload = byte_buffer(at, at + payload);
    r.inputs[i].scales = byte_buffer(at + payload, at + payload + scales);
    pos += payload + scales;
  }
  if (pos != end) return corrupt("trailing bytes");
  if (auto err = check_record(r)) return corrupt(err.message);
  return r;
}

namespace {

// One input as the coordinator took the contribution: int8 and fp4 kept encoded (the
// outer step decodes them), the others decoded to fp32 into `decoded`; with keep_encoded
// (a result record's change) none is decoded.
status take_input(const round_input& in, std::uint64_t count, encoded_values& enc, std::vector<float>& decoded,
                  bool keep_encoded = false) {
  if (in.codec == codec_kind::fp32) {
    decoded.resize(count);
    if (count) std::memcpy(decoded.data(), in.payload.data(), count * sizeof(float));
    return {};
  }
  enc.kind = in.codec;
  enc.count = count;
  enc.chunk = has_scales(in.codec) ? in.chunk : 0;
  enc.payload.assign(in.payload.begin(), in.payload.end());
  enc.scales.resize(in.scales.size() / sizeof(float));
  if (!enc.scales.empty()) std::memcpy(enc.scales.data(), in.scales.data(), in.scales.size());
  if (auto err = check_encoded(enc)) return err;
  if (keep_encoded || has_scales(in.codec)) return {};
  decoded.resize(count);
  return decode(enc, decoded.data());
}

}  // namespace

round_record result_record(std::uint32_t fragment, std::uint64_t round, std::uint64_t epoch, std::uint64_t theta_digest,
                           const outer_rule& rule, std::uint64_t count, byte_buffer payload, byte_buffer scales) {
  round_record r;
  r.fragment = fragment;
  r.round = round;
  r.epoch = epoch;
  r.count = count;
  r.theta_digest = theta_digest;
  r.rule = rule;
  r.form = record_form::result;
  round_input in;
  in.codec = rule.result_codec;
  in.chunk = has_scales(rule.result_codec) ? static_cast<std::uint32_t>(rule.result_chunk) : 0;
  in.payload = std::move(payload);
  in.scales = std::move(scales);
  r.inputs.push_back(std::move(in));
  return r;
}

round_record result_record(std::uint32_t fragment, std::uint64_t round, std::uint64_t epoch, std::uint64_t theta_digest,
                           const outer_rule& rule, const encoded_values& change) {
  const auto* scales = reinterpret_cast<const std::uint8_t*>(change.scales.data());
  auto r = result_record(fragment, round, epoch, theta_digest, rule, change.count,
                         byte_buffer(change.payload.begin(), change.payload.end()),
                         byte_buffer(scales, scales + change.scales.size() * sizeof(float)));
  r.inputs[0].codec = change.kind;  // as published: check_record refuses one that is not the rule's
  r.inputs[0].chunk = static_cast<std::uint32_t>(change.chunk);
  return r;
}

namespace {

status check_digest(const round_record& record, const outer_state& state) {
  const auto digest = digest64(state.theta.data(), state.theta.size() * sizeof(float));
  if (digest != record.theta_digest)
    return make_error(errc::digest_mismatch, "fragment " + std::to_string(record.fragment) + " round " +
                                                 std::to_string(record.round) + ": replay reached theta_global " +
                                                 digest_hex(digest) + ", the coordinator logged " +
                                                 digest_hex(record.theta_digest));
  return {};
}

}  // namespace

status apply_record(const round_record& record, outer_state& state, record_scratch& scratch) {
  if (state.theta.size() != record.count)
    return make_error(errc::tensor_mismatch, "round record of " + std::to_string(record.count) +
                                                 " values for a fragment of " + std::to_string(state.theta.size()));
  if (auto err = check_record(record)) return err;
  if (record.form == record_form::result) {
    std::vector<float> unused;  // a result's codec always stays encoded (take_input below)
    if (auto err = take_input(record.inputs[0], record.count, scratch.change, unused, true)) return err;
    auto rule = record.rule;
    rule.state_follows_result = true;
    if (auto err = apply_published_change(rule, scratch.change, state)) return err;
    return check_digest(record, state);
  }
  scratch.inputs.resize(record.inputs.size());
  scratch.encoded.resize(record.inputs.size());
  std::vector<weighted_input> weighted;
  for (std::size_t i = 0; i < record.inputs.size(); ++i) {
    const auto& in = record.inputs[i];
    if (auto err = take_input(in, record.count, scratch.encoded[i], scratch.inputs[i])) return err;
    if (has_scales(in.codec)) weighted.push_back({nullptr, in.weight, &scratch.encoded[i]});
    else weighted.push_back({scratch.inputs[i].data(), in.weight});
  }
  std::optional<encoded_values> published;
  if (record.form == record_form::average) {
    apply_outer_average(record.rule, scratch.inputs[0].data(), state, scratch.outer, published);
  } else if (auto err = apply_outer_round(record.rule, weighted, state, scratch.outer, published)) {
    return err;
  }
  return check_digest(record, state);
}

}  // namespace atl

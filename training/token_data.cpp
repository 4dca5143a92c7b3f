#include "training/token_data.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/process/config.hpp"

namespace atl {

expected<token_format> parse_token_format(const std::string& name) {
  if (name == "bytes") return token_format::bytes;
  if (name == "u16") return token_format::u16;
  return make_error(errc::invalid_config, "run.data_format: '" + name + "' is not bytes or u16");
}

std::size_t token_width(token_format f) { return f == token_format::u16 ? 2 : 1; }

token_split split_tokens(std::uint64_t tokens, std::uint64_t rank, std::uint64_t world_size) {
  token_split s;
  const std::uint64_t split = tokens * 9 / 10;
  const std::uint64_t shard = world_size == 0 ? 0 : split / world_size;
  s.train_begin = shard * rank;
  s.train_end = shard * (rank + 1);
  s.held_begin = split;
  s.held_end = tokens;
  return s;
}

std::vector<std::uint64_t> held_out_starts(std::uint64_t held_tokens, std::uint64_t window, std::uint64_t windows) {
  std::vector<std::uint64_t> starts;
  if (held_tokens <= window || windows == 0) return starts;
  const std::uint64_t room = held_tokens - window;  // starts in [0, room)
  const std::uint64_t stride = std::max<std::uint64_t>(1, room / windows);
  for (std::uint64_t i = 0; i < windows; ++i) starts.push_back((i * stride) % room);
  return starts;
}

status check_split(const std::string& path, std::uint64_t tokens, std::uint64_t window, std::uint64_t world_size) {
  const auto s = split_tokens(tokens, 0, world_size);
  const auto shard = s.train_end - s.train_begin;
  const auto held = s.held_end - s.held_begin;
  const auto advice = " (use a longer file or a shorter model.context)";
  // A shard needs room for a random start: more than one window.
  if (shard <= window)
    return make_error(errc::bad_data, path + ": " + std::to_string(tokens) + " tokens leave each of " +
                                          std::to_string(world_size) + " workers " + std::to_string(shard) +
                                          " training tokens, not more than a window of " + std::to_string(window) +
                                          advice);
  if (held <= window)
    return make_error(errc::bad_data, path + ": the held-out 10% has " + std::to_string(held) +
                                          " tokens, not more than a window of " + std::to_string(window) + advice);
  return {};
}

// The open file; closed when the last token_file copy goes.
struct token_file::descriptor {
  int fd = -1;
  std::uint64_t size = 0;  // bytes at open
  ~descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// Reads exactly `size` bytes at `offset`, or says why not: the file ends early (it was
// truncated after open) or the read fails.
status read_exactly(int fd, const std::string& path, std::uint64_t size_at_open, std::uint64_t offset,
                    unsigned char* out, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const auto n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(errc::storage_failure, path + ": read failed: " + std::strerror(errno));
    if (n == 0) {
      struct stat st {};
      const auto now = ::fstat(fd, &st) == 0 ? std::to_string(st.st_size) : std::string("unknown");
      return make_error(errc::bad_data, path + ": the file shrank while the run reads it (" +
                                            std::to_string(size_at_open) + " bytes at open, " + now +
                                            " now); replace a data file by renaming a new one over it, never in place");
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

std::int64_t decode_token(const unsigned char* d, token_format format) {
  if (format == token_format::bytes) return d[0];
  return static_cast<std::int64_t>(d[0] | (d[1] << 8));
}

}  // namespace

expected<token_file> token_file::open(const std::string& path, token_format format, std::uint64_t vocab) {
  if (path.empty()) return make_error(errc::bad_data, "no data file given (run.data / --data)");
  auto fd = std::make_shared<descriptor>();
  fd->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd->fd < 0) return make_error(errc::bad_data, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd->fd, &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(errc::bad_data, path + ": not a regular file");
  fd->size = static_cast<std::uint64_t>(st.st_size);
  if (fd->size == 0) return make_error(errc::bad_data, path + ": the file is empty");
  if (fd->size % token_width(format) != 0)
    return make_error(errc::bad_data, path + ": " + std::to_string(fd->size) +
                                          " bytes is not a whole number of uint16 tokens (run.data_format = u16)");
  token_file f;
  f.fd_ = fd;
  f.path_ = path;
  f.format_ = format;
  f.tokens_ = fd->size / token_width(format);
  // A byte file can hold every byte (vocab 256 covers it); otherwise one pass finds the
  // largest id, in chunks of whole tokens.
  f.max_token_ = format == token_format::bytes ? 255 : 0;
  if (format == token_format::u16 || (vocab > 0 && vocab < 256)) {
    f.max_token_ = 0;
    const std::size_t width = token_width(format);
    std::vector<unsigned char> chunk(std::size_t{1} << 20);
    for (std::uint64_t offset = 0; offset < fd->size; offset += chunk.size()) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), fd->size - offset));
      if (auto err = read_exactly(fd->fd, path, fd->size, offset, chunk.data(), n)) return err;
      for (std::size_t i = 0; i < n; i += width)
        f.max_token_ = std::max(f.max_token_, static_cast<std::uint64_t>(decode_token(chunk.data() + i, format)));
    }
  }
  if (vocab > 0 && f.max_token_ >= vocab)
    return make_error(errc::bad_data, path + ": holds token id " + std::to_string(f.max_token_) +
                                          ", outside the vocabulary of " + std::to_string(vocab) + " (run.vocab)");
  ::posix_fadvise(fd->fd, 0, 0, POSIX_FADV_RANDOM);  // training reads windows at random starts
  return f;
}

status token_file::copy(std::uint64_t start, std::uint64_t count, std::int64_t* out) const {
  const std::size_t width = token_width(format_);
  std::vector<unsigned char> bytes(count * width);
  if (auto err = read_exactly(fd_->fd, path_, fd_->size, start * width, bytes.data(), bytes.size())) return err;
  for (std::uint64_t i = 0; i < count; ++i) out[i] = decode_token(bytes.data() + i * width, format_);
  return {};
}

expected<token_windows> token_windows::open(const token_windows_spec& spec) {
  auto file = token_file::open(spec.path, spec.format, spec.vocab);
  if (!file) return file.err();
  const std::uint64_t window = spec.context + 1;
  if (auto err = check_split(spec.path, file->tokens(), window, spec.world_size)) return err;
  if (spec.rank >= spec.world_size)
    return make_error(errc::invalid_config,
                      "rank " + std::to_string(spec.rank) + " of " + std::to_string(spec.world_size) + " workers");
  const auto split = split_tokens(file->tokens(), spec.rank, spec.world_size);
  token_windows w(spec, std::move(*file), split);
  w.held_starts_ = held_out_starts(split.held_end - split.held_begin, window, spec.eval_batches * spec.batch);
  return w;
}

expected<std::vector<std::int64_t>> token_windows::sample_train(std::mt19937_64& rng) const {
  const std::uint64_t window = spec_.context + 1;
  const auto shard = static_cast<std::int64_t>(split_.train_end - split_.train_begin);
  std::uniform_int_distribution<std::int64_t> pick(0, shard - static_cast<std::int64_t>(window) - 1);
  std::vector<std::int64_t> out(spec_.batch * window);
  for (std::uint64_t i = 0; i < spec_.batch; ++i)
    if (auto err =
            file_.copy(split_.train_begin + static_cast<std::uint64_t>(pick(rng)), window, out.data() + i * window))
      return err;
  return out;
}

std::uint64_t token_windows::train_units() const {
  const auto whole = split_tokens(file_.tokens(), 0, 1);
  return (whole.train_end - whole.train_begin) / (spec_.context + 1);
}

expected<std::vector<std::int64_t>> token_windows::train_windows(const std::vector<std::uint64_t>& units) const {
  const std::uint64_t window = spec_.context + 1;
  const auto whole = split_tokens(file_.tokens(), 0, 1);
  const auto count = train_units();
  std::vector<std::int64_t> out(units.size() * window);
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (units[i] >= count)
      return make_error(errc::bad_data, "unit " + std::to_string(units[i]) + " of " + spec_.path + ", which has " +
                                            std::to_string(count) + " training windows");
    if (auto err = file_.copy(whole.train_begin + units[i] * window, window, out.data() + i * window)) return err;
  }
  return out;
}

expected<std::vector<std::int64_t>> token_windows::held_out_batch(std::uint64_t b) const {
  const std::uint64_t window = spec_.context + 1;
  std::vector<std::int64_t> out(spec_.batch * window);
  for (std::uint64_t i = 0; i < spec_.batch; ++i)
    if (auto err =
            file_.copy(split_.held_begin + held_starts_.at(b * spec_.batch + i), window, out.data() + i * window))
      return err;
  return out;
}

}  // namespace atl

namespace atl {

expected<std::uint64_t> resolve_vocab(const run_config& cfg, std::uint64_t model_vocab) {
  auto format = parse_token_format(cfg.data_format);
  if (!format) return format.err();
  std::uint64_t vocab = static_cast<std::uint64_t>(cfg.vocab);
  if (vocab == 0 && *format == token_format::bytes) vocab = 256;
  if (vocab == 0 && model_vocab == 0)
    return make_error(errc::invalid_config,
                      "run.vocab: u16 data needs the vocabulary size (--vocab) for a model that does not give it");
  if (vocab == 0) return model_vocab;
  if (model_vocab != 0 && model_vocab != vocab)
    return make_error(errc::bad_model, "the model outputs " + std::to_string(model_vocab) +
                                           " logits per token but the data's vocabulary is " + std::to_string(vocab) +
                                           " (run.vocab / run.data_format)");
  return vocab;
}

token_windows_spec windows_spec(const run_config& cfg, const std::string& default_file, std::uint64_t vocab,
                                std::uint64_t rank, std::uint64_t world_size) {
  token_windows_spec s;
  s.path = cfg.data.empty() ? default_file : cfg.data;
  s.format = cfg.data_format == "u16" ? token_format::u16 : token_format::bytes;
  s.vocab = vocab;
  s.context = static_cast<std::uint64_t>(cfg.context);
  s.batch = static_cast<std::uint64_t>(cfg.batch_size);
  s.eval_batches = static_cast<std::uint64_t>(cfg.eval_batches);
  s.rank = rank;
  s.world_size = world_size;
  return s;
}

}  // namespace atl

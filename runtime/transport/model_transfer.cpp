#include "runtime/transport/model_transfer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/core/digest.hpp"
#include "runtime/transport/control_client.hpp"

namespace atl {

using json = nlohmann::json;

expected<std::string> file_digest(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(errc::bad_model, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    ::close(fd);
    return make_error(errc::bad_model, path + ": not a regular, non-empty file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return make_error(errc::bad_model, path + ": cannot map: " + std::strerror(errno));
  const auto digest = digest64(p, size);
  ::munmap(p, size);
  return digest_hex(digest);
}

expected<std::vector<std::uint8_t>> read_file_chunk(const std::string& path, std::uint64_t offset, std::uint64_t max) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::storage_failure, path + ": cannot open");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  if (offset > size)
    return make_error(errc::invalid_config, "offset " + std::to_string(offset) + " is past the end of the model (" +
                                                std::to_string(size) + " bytes)");
  std::vector<std::uint8_t> out(std::min(max, size - offset));
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size())))
    return make_error(errc::storage_failure, path + ": cannot read");
  return out;
}

namespace {

expected<json> ask(const model_source& from, const std::string& argument, std::vector<std::uint8_t>* data) {
  auto reply = control_request(from.head, "model", argument, from.timeout, from.security);
  if (!reply) return reply.err();
  auto body = json::parse(reply->json, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return make_error(errc::malformed_frame, "the head's answer about the model is not JSON");
  if (!reply->ok) return make_error(errc::bad_model, "the head: " + body.value("error", std::string("refused")));
  if (data) *data = std::move(reply->data);
  return body;
}

}  // namespace

expected<model_offer> ask_for_model(const model_source& from) {
  auto body = ask(from, "", nullptr);
  if (!body) return body.err();
  model_offer offer;
  offer.digest = body->value("digest", std::string());
  offer.bytes = body->value("bytes", std::uint64_t{0});
  return offer;
}

status fetch_model(const model_source& from, const model_offer& offer, const std::string& dest,
                   const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  if (auto have = file_digest(dest); have && *have == offer.digest) return {};
  const std::string partial = dest + ".part";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(errc::storage_failure, "cannot write " + partial);
    std::uint64_t done = 0;
    while (done < offer.bytes) {
      std::vector<std::uint8_t> chunk;
      auto body = ask(from, std::to_string(done), &chunk);
      if (!body) return body.err();
      if (body->value("offset", std::uint64_t{UINT64_MAX}) != done || chunk.empty() ||
          chunk.size() > offer.bytes - done)
        return make_error(errc::malformed_frame,
                          "the head sent a model chunk that does not fit at " + std::to_string(done));
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
      if (!out) return make_error(errc::storage_failure, "cannot write " + partial + " (disk full?)");
      done += chunk.size();
      if (progress) progress(done, offer.bytes);
    }
    if (!out.flush()) return make_error(errc::storage_failure, "cannot write " + partial);
  }
  auto got = file_digest(partial);
  if (!got) return got.err();
  if (*got != offer.digest) {
    std::remove(partial.c_str());
    return make_error(errc::digest_mismatch,
                      "the model that came has digest " + *got + ", the head offered " + offer.digest);
  }
  if (std::rename(partial.c_str(), dest.c_str()) != 0)
    return make_error(errc::storage_failure, "cannot rename " + partial + " to " + dest + ": " + std::strerror(errno));
  return {};
}

}  // namespace atl

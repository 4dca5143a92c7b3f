#include "runtime/transport/security.hpp"

#include <sys/stat.h>

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <zmq_addon.hpp>

#include "runtime/process/log.hpp"

namespace atl {
namespace {

namespace fs = std::filesystem;
constexpr std::size_t z85_key_chars = 40;
constexpr int handshake_timeout_ms = 5000;  // ZeroMQ's default is 30 s

bool is_z85_key(const std::string& k) {
  if (k.size() != z85_key_chars) return false;
  std::array<std::uint8_t, 32> raw{};
  return zmq_z85_decode(raw.data(), k.c_str()) != nullptr;
}

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// Calls `use(line, where)` for each line of `path` that is neither blank nor a comment,
// trimmed; `where` is "PATH:LINE" for error messages. Stops at the first error.
template <class Use>
status for_each_content_line(const std::string& path, const std::string& missing_hint, Use use) {
  std::ifstream in(path);
  if (!in) return make_error(errc::invalid_config, "cannot read " + path + missing_hint);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (auto err = use(line, path + ":" + std::to_string(line_no))) return err;
  }
  return {};
}

// Reads "public = ..." and "secret = ..." lines; `need_secret` for key pairs.
expected<curve_keypair> read_key_file(const std::string& path, bool need_secret) {
  curve_keypair kp;
  auto err =
      for_each_content_line(path, " (made by `atoll keygen`)", [&](const std::string& line, const std::string& where) {
        const auto eq = line.find('=');
        const std::string key = eq == std::string::npos ? "" : trim(line.substr(0, eq));
        const std::string value = eq == std::string::npos ? "" : trim(line.substr(eq + 1));
        if (key != "public" && key != "secret")
          return make_error(errc::invalid_config, where + ": expected `public = KEY` or `secret = KEY`");
        if (!is_z85_key(value))
          return make_error(errc::invalid_config, where + ": " + key + " key is not a 40-character Z85 key");
        (key == "public" ? kp.public_key : kp.secret_key) = value;
        return error{};
      });
  if (err) return err;
  if (kp.public_key.empty()) return make_error(errc::invalid_config, path + ": no public key");
  if (need_secret && kp.secret_key.empty()) return make_error(errc::invalid_config, path + ": no secret key");
  return kp;
}

status write_file(const fs::path& path, const std::string& text, bool secret) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return make_error(errc::storage_failure, "cannot write " + path.string());
  if (secret && ::chmod(path.c_str(), 0600) != 0)
    return make_error(errc::storage_failure, "cannot chmod " + path.string());
  return {};
}

std::string key_file_text(const curve_keypair& kp, const char* what) {
  std::ostringstream s;
  s << "# atoll CURVE key pair: " << what << ". Keep it secret.\n"
    << "public = " << kp.public_key << "\nsecret = " << kp.secret_key << "\n";
  return s.str();
}

}  // namespace

status check_curve_available() {
  if (!zmq_has("curve"))
    return make_error(errc::invalid_config, "this libzmq has no CURVE support; keys cannot be used");
  return {};
}

expected<curve_keypair> generate_keypair() {
  if (auto err = check_curve_available()) return err;
  char pub[z85_key_chars + 1] = {0}, sec[z85_key_chars + 1] = {0};
  if (zmq_curve_keypair(pub, sec) != 0) return make_error(errc::invalid_config, "zmq_curve_keypair failed");
  return curve_keypair{pub, sec};
}

status write_key_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(errc::storage_failure, "cannot create " + dir + ": " + ec.message());
  for (const char* f : {"head.key", "client.key", "head.pub", "authorized_keys"})
    if (fs::exists(fs::path(dir) / f))
      return make_error(errc::invalid_config, (fs::path(dir) / f).string() + " exists; keys are never overwritten");
  auto head = generate_keypair();
  if (!head) return head.err();
  auto client = generate_keypair();
  if (!client) return client.err();
  if (auto err = write_file(fs::path(dir) / "head.key", key_file_text(*head, "the head (atoll up)"), true)) return err;
  if (auto err = write_file(fs::path(dir) / "client.key",
                            key_file_text(*client, "cluster members (atoll join, atollctl)"), true))
    return err;
  if (auto err = write_file(fs::path(dir) / "head.pub", "public = " + head->public_key + "\n", false)) return err;
  return write_file(fs::path(dir) / "authorized_keys",
                    "# client public keys the head admits, one per line\n" + client->public_key + "  client.key\n",
                    false);
}

expected<std::string> add_client_key(const std::string& dir, const std::string& name) {
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return make_error(errc::invalid_config, "client name '" + name + "': use letters, digits, - and _");
  if (name.empty()) return make_error(errc::invalid_config, "client name is empty");
  if (!fs::exists(fs::path(dir) / "authorized_keys"))
    return make_error(errc::invalid_config,
                      dir + " has no authorized_keys; run `atoll keygen --out " + dir + "` first");
  const auto path = fs::path(dir) / "clients" / (name + ".key");
  if (fs::exists(path)) return make_error(errc::invalid_config, path.string() + " exists");
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return make_error(errc::storage_failure, "cannot create " + path.parent_path().string());
  auto kp = generate_keypair();
  if (!kp) return kp.err();
  if (auto err = write_file(path, key_file_text(*kp, ("client " + name).c_str()), true)) return err;
  std::ofstream out(fs::path(dir) / "authorized_keys", std::ios::app);
  out << kp->public_key << "  clients/" << name << ".key\n";
  if (!out) return make_error(errc::storage_failure, "cannot append to authorized_keys");
  return path.string();
}

expected<link_security> load_server_security(const std::string& dir) {
  if (auto err = check_curve_available()) return err;
  auto head = read_key_file((fs::path(dir) / "head.key").string(), true);
  if (!head) return head.err();
  link_security sec;
  sec.own = *head;
  const auto path = (fs::path(dir) / "authorized_keys").string();
  auto err = for_each_content_line(path, "", [&](const std::string& line, const std::string& where) {
    const std::string key = line.substr(0, line.find_first_of(" \t"));  // a comment may follow the key
    if (!is_z85_key(key)) return make_error(errc::invalid_config, where + ": not a 40-character Z85 key");
    sec.authorized.insert(key);
    return error{};
  });
  if (err) return err;
  if (sec.authorized.empty()) return make_error(errc::invalid_config, path + " lists no client keys");
  return sec;
}

expected<link_security> load_client_security(const std::string& dir, const std::string& client_key_file) {
  if (auto err = check_curve_available()) return err;
  auto own = read_key_file(client_key_file.empty() ? (fs::path(dir) / "client.key").string() : client_key_file, true);
  if (!own) return own.err();
  auto head = read_key_file((fs::path(dir) / "head.pub").string(), false);
  if (!head) return head.err();
  link_security sec;
  sec.own = *own;
  sec.server_public_key = head->public_key;
  return sec;
}

bool is_local_endpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  const std::string host = endpoint.substr(6, endpoint.rfind(':') - 6);
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]" || host == "::1";
}

void apply_server_security(zmq::socket_t& sock, const link_security& sec) {
  if (!sec.enabled()) return;
  sock.set(zmq::sockopt::curve_server, true);
  sock.set(zmq::sockopt::curve_secretkey, sec.own.secret_key);
  sock.set(zmq::sockopt::zap_domain, zap_domain);
  // ZMQ_ZAP_ENFORCE_DOMAIN (93) is a draft option in 4.3.4 that cppzmq and zmq.h hide
  // unless ZMQ_BUILD_DRAFT_API; Debian's libzmq accepts it (checked with getsockopt). A
  // library that refuses it still asks our handler for every CURVE client, so unknown
  // keys stay out either way (tests/unit/security_test.cpp).
  constexpr int zap_enforce_domain_option = 93;
  const int one = 1;
  if (zmq_setsockopt(sock.handle(), zap_enforce_domain_option, &one, sizeof one) != 0)
    log_warn("this libzmq refuses ZMQ_ZAP_ENFORCE_DOMAIN; the ZAP handler still checks every CURVE client");
  sock.set(zmq::sockopt::handshake_ivl, handshake_timeout_ms);
}

void apply_client_security(zmq::socket_t& sock, const link_security& sec) {
  if (!sec.enabled()) return;
  sock.set(zmq::sockopt::curve_serverkey, sec.server_public_key);
  sock.set(zmq::sockopt::curve_publickey, sec.own.public_key);
  sock.set(zmq::sockopt::curve_secretkey, sec.own.secret_key);
  sock.set(zmq::sockopt::handshake_ivl, handshake_timeout_ms);
}

zap_handler::zap_handler(zmq::context_t& ctx, std::set<std::string> authorized)
    : sock_(ctx, zmq::socket_type::rep), authorized_(std::move(authorized)) {
  sock_.set(zmq::sockopt::linger, 0);
  sock_.bind("inproc://zeromq.zap.01");
}

void zap_handler::set_authorized(std::set<std::string> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  authorized_ = std::move(keys);
}

zap_handler::verdict zap_handler::handle() {
  std::vector<zmq::message_t> req;
  if (!zmq::recv_multipart(sock_, std::back_inserter(req), zmq::recv_flags::dontwait)) return verdict::none;
  // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
  const auto part = [&](std::size_t i) { return i < req.size() ? req[i].to_string() : std::string(); };
  bool admit = false;
  std::string key;
  if (req.size() >= 7 && part(0) == "1.0" && part(2) == zap_domain && part(5) == "CURVE" && req[6].size() == 32) {
    char z85[z85_key_chars + 1] = {0};
    if (zmq_z85_encode(z85, static_cast<const std::uint8_t*>(req[6].data()), 32)) {
      key = z85;
      std::lock_guard<std::mutex> lock(mu_);
      admit = authorized_.count(key) > 0;
    }
  }
  // The user id is the client's key: every message on the connection carries it as the
  // "User-Id" property, which is how the ingress knows who really sent a frame.
  const std::array<std::string, 6> reply = {
      "1.0", part(1), admit ? "200" : "400", admit ? "OK" : "unknown key", admit ? key : "", ""};
  for (std::size_t i = 0; i < reply.size(); ++i)
    sock_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  return admit ? verdict::admitted : verdict::denied;
}

}  // namespace atl

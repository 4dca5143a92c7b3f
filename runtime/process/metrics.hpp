#pragma once
// JSON-lines metrics: one object per line with a "type" field ("step", "eval", "round",
// "summary"), a wall-clock "time" (seconds since the writer opened), "unix_s" (the system
// clock: lines of several heads in turn can be put on one time line) and the figures.
// Owned by one actor; not thread-safe.
#include <chrono>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/process/json_text.hpp"

namespace atl {

class metrics_writer {
 public:
  metrics_writer() = default;
  explicit metrics_writer(const std::string& path)
      : out_(path, std::ios::app), start_(std::chrono::steady_clock::now()) {}
  bool is_open() const { return out_.is_open(); }
  void write(const std::string& type, nlohmann::json fields) {
    if (!out_.is_open()) return;
    fields["type"] = type;
    fields["time"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    fields["unix_s"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    out_ << json_text(fields) << '\n';  // peers' strings need not be UTF-8
    out_.flush();
  }

 private:
  std::ofstream out_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace atl

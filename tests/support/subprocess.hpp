#pragma once
// Child processes for the process-tier tests: start, wait with a deadline, signal.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace atl::testing {

class subprocess {
 public:
  // Starts `args` with stdout and stderr appended to `log`, and `env` (NAME, value) set.
  subprocess(std::vector<std::string> args, std::string log,
             const std::vector<std::pair<std::string, std::string>>& env = {})
      : log_(std::move(log)) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  subprocess(const subprocess&) = delete;
  ~subprocess() {
    if (running()) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool running() {
    if (exited_) return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) record(st);
    return !exited_;
  }
  // Exit code, 128 + signal for a signal, or -1 if still running at the deadline.
  int wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return exited_ ? code_ : -1;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  // Resident memory in KiB from /proc (0 if gone).
  long rss_kib() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
  }
  std::string output() const {
    std::ifstream in(log_);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
  }

 private:
  void record(int st) {
    exited_ = true;
    code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  pid_t pid_ = -1;
  std::string log_;
  bool exited_ = false;
  int code_ = -1;
};

// Runs a command to completion and returns (exit code, output).
inline std::pair<int, std::string> run_command(const std::vector<std::string>& args, const std::string& log,
                                               std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  std::remove(log.c_str());
  subprocess p(args, log);
  const int code = p.wait(limit);
  return {code, p.output()};
}

}  // namespace atl::testing

#include "training/step_profile.hpp"

#include <cstdlib>
#include <stdexcept>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include "runtime/process/log.hpp"

namespace atl {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// LibTorch's errors carry a backtrace after their first line.
std::string first_line(const char* what) {
  const std::string text(what);
  return text.substr(0, text.find('\n'));
}

// A whole non-negative decimal number, nothing else.
std::optional<std::int64_t> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(text);
}

}  // namespace

expected<std::optional<step_profile_window>> parse_step_profile(const char* spec) {
  if (spec == nullptr || *spec == '\0') return std::optional<step_profile_window>{};
  const std::string text(spec);
  const auto refuse = [&](const std::string& why) {
    return make_error(errc::invalid_config, "ATOLL_TORCH_PROFILE='" + text + "': " + why +
                                                " (expected FIRST:COUNT:FILE, e.g. 40:20:trace.json)");
  };
  const auto a = text.find(':');
  const auto b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos) return refuse("three fields separated by ':'");
  const auto first = whole_number(text.substr(0, a));
  const auto count = whole_number(text.substr(a + 1, b - a - 1));
  if (!first || !count) return refuse("FIRST and COUNT are whole numbers");
  if (*count == 0) return refuse("COUNT is at least 1");
  if (b + 1 == text.size()) return refuse("FILE is empty");
  return std::optional<step_profile_window>{step_profile_window{*first, *count, text.substr(b + 1)}};
}

step_profiler::step_profiler(std::optional<step_profile_window> window, const torch::Device& device)
    : window_(std::move(window)), device_(device) {}

step_profiler step_profiler::from_environment(const torch::Device& device) {
  auto window = parse_step_profile(std::getenv("ATOLL_TORCH_PROFILE"));
  if (!window) throw std::invalid_argument(window.err().message);
  return step_profiler(*window, device);
}

step_profiler::~step_profiler() {
  if (running_) stop();  // the run ended inside the window: what was traced still counts
}

void step_profiler::before_step(std::int64_t step) {
  if (!window_ || running_ || step != window_->first) return;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device_.is_cuda()) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO);
  try {
    if (device_.is_cuda()) torch::cuda::synchronize();  // the window starts with nothing queued before it
    kineto::prepareProfiler(config, activities);
    kineto::enableProfiler(config, activities);
    running_ = true;
    log_info("profiling steps " + std::to_string(window_->first) + " to " +
             std::to_string(window_->first + window_->count - 1) + " into " + window_->path);
  } catch (const std::exception& e) {
    failure_ = make_error(errc::invalid_config, "this LibTorch cannot profile: " + first_line(e.what()));
    log_warn("ATOLL_TORCH_PROFILE: " + failure_.message + "; training on");
    window_.reset();
  }
}

void step_profiler::after_step(std::int64_t step) {
  if (running_ && step + 1 >= window_->first + window_->count) stop();
}

void step_profiler::stop() {
  running_ = false;
  try {
    if (device_.is_cuda()) torch::cuda::synchronize();  // the window's kernels have run
    kineto::disableProfiler()->save(window_->path);
    log_info("wrote the profile of steps " + std::to_string(window_->first) + " to " +
             std::to_string(window_->first + window_->count - 1) + " to " + window_->path);
  } catch (const std::exception& e) {
    // Debian's CPU LibTorch profiles but, built without Kineto, cannot save a trace.
    failure_ = make_error(errc::invalid_config, "writing the trace failed: " + first_line(e.what()));
    log_warn("ATOLL_TORCH_PROFILE: " + failure_.message);
  }
  window_.reset();
}

}  // namespace atl

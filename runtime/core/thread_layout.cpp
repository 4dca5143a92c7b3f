#include "runtime/core/thread_layout.hpp"

#include <algorithm>
#include <cstdio>

namespace atl {

std::string to_string(const thread_layout& layout) {
  return std::to_string(layout.torch) + "x" + std::to_string(layout.blas);
}

expected<thread_layout> parse_thread_layout(const std::string& text) {
  const auto bad = [&] {
    return make_error(errc::invalid_config, "thread layout \"" + text +
                                                "\": want TxB, LibTorch threads x BLAS threads, each 1 to 1024 "
                                                "(for example 1x2), or auto");
  };
  const auto x = text.find('x');
  if (x == std::string::npos || x == 0 || x + 1 == text.size() || text.size() > 9) return bad();
  thread_layout layout;
  int* parts[] = {&layout.torch, &layout.blas};
  const std::string halves[] = {text.substr(0, x), text.substr(x + 1)};
  for (int i = 0; i < 2; ++i) {
    if (!std::all_of(halves[i].begin(), halves[i].end(), [](char c) { return c >= '0' && c <= '9'; })) return bad();
    const int n = std::stoi(halves[i]);
    if (n < 1 || n > 1024) return bad();
    *parts[i] = n;
  }
  return layout;
}

std::vector<thread_layout> candidate_layouts(int budget) {
  const int b = std::max(1, budget);
  std::vector<thread_layout> out;
  for (const thread_layout l : {thread_layout{b, b}, thread_layout{1, b}, thread_layout{b, 1}, thread_layout{1, 1}})
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  return out;
}

thread_layout pick_layout(const std::vector<layout_time>& times, double tolerance) {
  const auto fastest = std::min_element(times.begin(), times.end(), [](const layout_time& a, const layout_time& b) {
    return a.seconds_per_step < b.seconds_per_step;
  });
  const double limit = fastest->seconds_per_step * (1.0 + tolerance);
  const layout_time* best = &*fastest;
  for (const auto& t : times) {
    const int threads = t.layout.torch + t.layout.blas, best_threads = best->layout.torch + best->layout.blas;
    if (t.seconds_per_step <= limit && threads < best_threads) best = &t;
  }
  return best->layout;
}

layout_trial::layout_trial(std::vector<thread_layout> candidates, trial_plan plan)
    : candidates_(std::move(candidates)), plan_(plan), samples_(candidates_.size()) {
  if (candidates_.size() == 1) {  // nothing to choose between
    chosen_ = candidates_.front();
    times_.push_back({candidates_.front(), 0.0});
  }
}

int layout_trial::length() const {
  if (candidates_.size() <= 1) return 0;
  return plan_.warmup_steps + plan_.passes * static_cast<int>(candidates_.size()) * plan_.steps_per_stint;
}

std::optional<thread_layout> layout_trial::before_step() {
  if (settled() && current_ == chosen_) return std::nullopt;
  thread_layout want;
  if (settled()) {
    want = *chosen_;
  } else if (step_ < plan_.warmup_steps) {
    want = candidates_.front();
  } else {
    const int stint = (step_ - plan_.warmup_steps) / plan_.steps_per_stint;
    want = candidates_[static_cast<std::size_t>(stint) % candidates_.size()];
  }
  if (current_ && *current_ == want) return std::nullopt;
  current_ = want;
  return want;
}

void layout_trial::after_step(double seconds) {
  if (settled()) return;
  const int trying = step_ - plan_.warmup_steps;
  ++step_;
  if (trying < 0) return;
  const int stint = trying / plan_.steps_per_stint;
  if (trying % plan_.steps_per_stint != 0)  // a stint's first step is not timed
    samples_[static_cast<std::size_t>(stint) % candidates_.size()].push_back(seconds);
  if (step_ < length()) return;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    auto s = samples_[i];
    std::sort(s.begin(), s.end());
    const double median = s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
    times_.push_back({candidates_[i], median});
  }
  chosen_ = pick_layout(times_);
}

expected<thread_plan> plan_threads(const thread_plan_input& in) {
  const int workers = std::max(1, in.local_workers);
  thread_plan plan;
  if (in.process_threads > 0) plan.budget = std::max(1, in.process_threads / workers);
  else if (in.threads_per_worker > 0) plan.budget = in.threads_per_worker;
  else plan.budget = std::max(1, in.cores / workers);
  if (in.cpu_workers <= 0) return plan;
  if (in.layout != "auto") {
    auto fixed = parse_thread_layout(in.layout);
    if (!fixed) return fixed.err();
    plan.layouts = {*fixed};
  } else if (in.cpu_workers == 1) {
    plan.layouts = candidate_layouts(plan.budget);
  } else {
    plan.layouts = {thread_layout{plan.budget, plan.budget}};
  }
  return plan;
}

std::string describe(const layout_trial& trial) {
  char buf[64];
  const auto chosen = trial.chosen();
  std::string text = to_string(chosen);
  std::string others;
  for (const auto& t : trial.times()) {
    std::snprintf(buf, sizeof buf, "%.3f", t.seconds_per_step);
    if (t.layout == chosen) text += " (" + std::string(buf) + " s/step";
    else others += (others.empty() ? "" : ", ") + to_string(t.layout) + " " + buf;
  }
  if (trial.times().size() <= 1) return to_string(chosen);  // nothing was tried
  return text + "; " + others + ")";
}

}  // namespace atl

// Data-parallel baseline steps (run.mode = ddp, actors/worker/worker.hpp): every step the worker
// sends its gradients of every fragment, waits for their averages, then takes its AdamW
// step: the same model, data order and optimizer as DiLoCo, synchronised every step.
#include "actors/shared/messages.hpp"
#include "actors/worker/steps.hpp"
#include "actors/worker/strategy.hpp"

namespace atl {
namespace {

class ddp_steps final : public step_strategy {
 public:
  void step(worker_self self) override {
    auto& st = self->state;
    maybe_evaluate(self);
    if (st.step >= st.cfg.run.steps) return finish(self);
    const auto result = st.model->compute_gradients(st.step);
    st.last_loss = result.loss;
    st.tokens_since_report += result.tokens;
    st.tokens_total += result.tokens;
    for (std::size_t f = 0; f < st.fragments.size() && st.current == worker_state::phase::training; ++f) {
      std::vector<float> grads(st.model->fragment_size(f));
      st.model->read_gradients(f, grads.data());
      encoded_values enc;
      if (auto err = encode(codec_kind::fp32, grads.data(), grads.size(), 0, enc))
        return quit_on_encode_error(self, f, err);
      send_contribution(self, f, st.fragments[f].round() + 1, std::move(enc));  // one round a step
    }
    if (st.current == worker_state::phase::training) block(st);
  }

  // Once every fragment's average is here: write them as gradients and take the step.
  void result_arrived(worker_self self, std::size_t) override {
    auto& st = self->state;
    for (const auto& frag : st.fragments)
      if (!frag.has_result()) return;
    for (std::size_t f = 0; f < st.fragments.size(); ++f) {
      auto average = st.fragments[f].take_result();
      st.model->write_gradients(f, (*average)->data());
    }
    st.model->apply_gradients(st.step);
    st.step++;
    if (st.step % st.cfg.run.log_every == 0) report_progress(self);
    unblock(self);
  }

  float evaluate_global(worker_state& st) override { return st.model->evaluate(); }  // replicas are identical
  bool recovers_rounds() const override { return false; }
};

}  // namespace

std::unique_ptr<step_strategy> make_ddp_steps() { return std::make_unique<ddp_steps>(); }

}  // namespace atl

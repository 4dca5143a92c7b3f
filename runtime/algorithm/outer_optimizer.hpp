#pragma once
// The outer step of DiLoCo: SGD with Nesterov momentum on theta_global, driven by the
// averaged pseudo-gradient (theta_global - theta_local). Matches torch.optim.SGD with
// nesterov=True and dampening 0:
//   buf   = momentum * buf + g
//   theta = theta - lr * (g + momentum * buf)
// Plain fp32 loops, no LibTorch: the coordinator runs this, and it must be bit-exact
// wherever it runs.
#include <cstddef>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

struct outer_options {
  float lr = 0.7f;
  float momentum = 0.9f;
};

// theta, momentum_buffer and grad have equal sizes.
void nesterov_step(const outer_options& opt, float* theta, float* momentum_buffer, const float* grad, std::size_t n);

// The momentum after a round whose change of theta was `change` (what was published, after
// encoding) rather than the exact step's: the gradient g that makes the step give `change`
// from this buffer, change = -lr ((1 + mu) g + mu^2 buf), then buf = mu buf + g. A keeper
// that knows only the published change reaches the same bits (storage/round_record.hpp).
// With lr 0 nothing moves theta and g is 0: the buffer only decays.
void momentum_after_change(const outer_options& opt, float* momentum_buffer, const float* change, std::size_t n);

struct encoded_values;  // runtime/algorithm/codec.hpp

// One contribution to an average: fp32 values, or (the outer step only, not
// weighted_average) values still encoded, which it decodes block by block.
struct weighted_input {
  const float* values;
  float weight;
  const encoded_values* encoded = nullptr;  // instead of values; checked by check_encoded
};

// out = sum_i w_i x_i / sum_i w_i, accumulated in fp32 in the order given (callers sort
// inputs by worker id so the result does not depend on arrival order): out starts at zero
// and each input adds (w_i / sum w) * x_i in turn. fp32 inputs only (an encoded one is
// refused: invalid_config).
status weighted_average(const std::vector<weighted_input>& inputs, std::size_t n, std::vector<float>& out);
// The factors weighted_average multiplies by, w_i / sum w, in the inputs' order. Refuses no
// inputs and a weight that is not positive and finite.
expected<std::vector<float>> normalised_weights(const std::vector<weighted_input>& inputs);

// True when every value is finite.
bool all_finite(const float* values, std::size_t n);

}  // namespace atl

#pragma once
// expected<T>: a value or an atl::error. Small on purpose (C++17 has no std::expected).
#include <cassert>
#include <utility>
#include <variant>

#include "runtime/core/error.hpp"

namespace atl {

template <class T>
class expected {
 public:
  expected(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  expected(error err) : data_(std::move(err)) {}  // NOLINT
  bool has_value() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return std::get<T>(data_); }
  const T& operator*() const { return std::get<T>(data_); }
  T* operator->() { return &std::get<T>(data_); }
  const T* operator->() const { return &std::get<T>(data_); }
  const error& err() const { return std::get<error>(data_); }

 private:
  std::variant<T, error> data_;
};

// For operations that return nothing but may fail.
using status = error;  // errc::none means success

}  // namespace atl

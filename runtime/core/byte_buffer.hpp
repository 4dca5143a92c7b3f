#pragma once
// byte_buffer: immutable bytes of one wire frame, shared rather than copied.
//
// A fragment's tensor is tens to hundreds of MiB, and on a 2-core machine every pass over
// it shows in a round's time. So a large frame's bytes are not copied once they exist: a
// received ZeroMQ frame is borrowed in place (its owner, the ZeroMQ message, lives as
// long as any buffer that points into it), and copying a byte_buffer shares the bytes
// (the coordinator sends one theta_global to every keeper and every worker). Nothing
// writes to the bytes after construction, so sharing them across threads is safe.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace atl {

class byte_buffer {
 public:
  byte_buffer() = default;
  // Takes the vector's bytes without copying them (implicit: a payload becomes a frame).
  byte_buffer(std::vector<std::uint8_t>&& owned) { adopt(std::move(owned)); }
  byte_buffer(const std::vector<std::uint8_t>& bytes) : byte_buffer(bytes.begin(), bytes.end()) {}
  template <class It>
  byte_buffer(It first, It last) {
    adopt(std::vector<std::uint8_t>(first, last));
  }
  // `size` bytes at `data`, valid while `owner` lives; no copy.
  static byte_buffer borrowed(const std::uint8_t* data, std::size_t size, std::shared_ptr<const void> owner) {
    byte_buffer b;
    b.owner_ = std::move(owner);
    b.data_ = data;
    b.size_ = size;
    return b;
  }

  template <class It>
  void assign(It first, It last) {
    *this = byte_buffer(first, last);
  }

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::uint8_t* begin() const { return data_; }
  const std::uint8_t* end() const { return data_ + size_; }
  std::uint8_t operator[](std::size_t i) const { return data_[i]; }
  std::vector<std::uint8_t> to_vector() const { return {begin(), end()}; }

  friend bool operator==(const byte_buffer& a, const byte_buffer& b) {
    return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data_, b.data_, a.size_) == 0);
  }
  friend bool operator!=(const byte_buffer& a, const byte_buffer& b) { return !(a == b); }

 private:
  void adopt(std::vector<std::uint8_t>&& owned) {
    auto held = std::make_shared<const std::vector<std::uint8_t>>(std::move(owned));
    data_ = held->data();
    size_ = held->size();
    owner_ = std::move(held);
  }

  std::shared_ptr<const void> owner_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace atl

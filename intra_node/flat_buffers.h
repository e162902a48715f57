// A list of float buffers seen as one flat array, the way AggregateGradients treats a list of gradient tensors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/element_range.h"

namespace gradagg {

struct FloatSpan {
  float* data = nullptr;
  size_t size = 0;
};

class FlatBuffers {
 public:
  FlatBuffers() = default;
  explicit FlatBuffers(std::vector<FloatSpan> spans);

  size_t size() const { return size_; }

  // dst[i] = flat[range.begin + i]
  void CopyOut(ElementRange range, float* dst) const;
  // flat[range.begin + i] = src[i]
  void CopyIn(ElementRange range, const float* src) const;
  // flat[i] = 0 for every element
  void Zero() const;
  // The whole flat array when it lies in one buffer (empty ones aside), else nullptr.
  float* Contiguous() const;

  // Calls visit(piece, offsetInRange, length) for each contiguous piece of `range`, in order.
  template <typename Visit>
  void ForEachPiece(ElementRange range, Visit visit) const;

 private:
  std::vector<FloatSpan> spans_;
  std::vector<size_t> starts_;  // flat index of each span's first element
  size_t size_ = 0;
};

template <typename Visit>
void FlatBuffers::ForEachPiece(ElementRange range, Visit visit) const {
  if (range.end() > size_) {
    throw std::out_of_range("range [" + std::to_string(range.begin) + ", " + std::to_string(range.end()) +
                            ") outside " + std::to_string(size_) + " elements");
  }
  if (range.count == 0) return;
  // First span that holds range.begin: the last start <= begin among non-empty spans.
  size_t span =
      static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), range.begin) - starts_.begin()) - 1;
  size_t done = 0;
  while (done < range.count) {
    const size_t flat = range.begin + done;
    while (flat >= starts_[span] + spans_[span].size) ++span;  // skip spans that end before flat (empty ones too)
    const size_t offset = flat - starts_[span];
    const size_t length = std::min(spans_[span].size - offset, range.count - done);
    visit(spans_[span].data + offset, done, length);
    done += length;
  }
}

}  // namespace gradagg

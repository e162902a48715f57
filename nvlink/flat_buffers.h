// A list of float buffers seen as one flat array, the way AggregateGradients treats a list of gradient tensors.
#pragma once

#include <cstddef>
#include <vector>

#include "ground/element_range.h"

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

 private:
  // Calls visit(piece, offsetInRange, length) for each contiguous piece of `range`, in order.
  template <typename Visit>
  void ForEachPiece(ElementRange range, Visit visit) const;

  std::vector<FloatSpan> spans_;
  std::vector<size_t> starts_;  // flat index of each span's first element
  size_t size_ = 0;
};

}  // namespace gradagg

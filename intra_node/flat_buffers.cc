#include "intra_node/flat_buffers.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gradagg {

FlatBuffers::FlatBuffers(std::vector<FloatSpan> spans) : spans_(std::move(spans)) {
  starts_.reserve(spans_.size());
  for (const FloatSpan& span : spans_) {
    if (span.data == nullptr && span.size != 0) {
      throw std::invalid_argument("gradient buffer " + std::to_string(starts_.size()) + " is null but has " +
                                  std::to_string(span.size) + " elements");
    }
    starts_.push_back(size_);
    size_ += span.size;
  }
}

void FlatBuffers::CopyOut(ElementRange range, float* dst) const {
  ForEachPiece(range,
               [dst](float* piece, size_t at, size_t length) { std::memcpy(dst + at, piece, length * sizeof(float)); });
}

void FlatBuffers::CopyIn(ElementRange range, const float* src) const {
  ForEachPiece(range,
               [src](float* piece, size_t at, size_t length) { std::memcpy(piece, src + at, length * sizeof(float)); });
}

float* FlatBuffers::Contiguous() const {
  const FloatSpan* only = nullptr;
  for (const FloatSpan& span : spans_) {
    if (span.size == 0) continue;
    if (only != nullptr) return nullptr;
    only = &span;
  }
  return only != nullptr ? only->data : nullptr;
}

void FlatBuffers::Zero() const {
  for (const FloatSpan& span : spans_) std::fill(span.data, span.data + span.size, 0.0f);
}

}  // namespace gradagg

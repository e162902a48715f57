#include "nvlink/flat_buffers.h"

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

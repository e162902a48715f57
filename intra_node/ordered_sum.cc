// SumInOrder of ordered_sum.h, written once over Highway's vectors; hwy/foreach_target.h includes this file again
// for every target and HWY_DYNAMIC_DISPATCH picks the best the CPU has. Additions only, so the vector and scalar
// parts round alike: every element sees the same float32 additions in the same order.
#include "intra_node/ordered_sum.h"

#include <algorithm>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "intra_node/ordered_sum.cc"
#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gradagg {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements [begin, end) one at a time: the same additions as the vectors make.
void SumScalar(const float* const* terms, size_t count, size_t begin, size_t end, float* out, float* alsoOut) {
  for (size_t i = begin; i < end; ++i) {
    float sum = terms[0][i];
    for (size_t t = 1; t < count; ++t) sum += terms[t][i];
    out[i] = sum;
    if (alsoOut != nullptr) alsoOut[i] = sum;
  }
}

template <bool kStream>
void SumVectors(const float* const* terms, size_t count, size_t length, float* out, float* alsoOut) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  if (kStream) {  // streamed stores need aligned addresses: the elements before the first one go one at a time
    const size_t misaligned = (reinterpret_cast<uintptr_t>(out) / sizeof(float)) % lanes;
    i = std::min(length, misaligned == 0 ? 0 : lanes - misaligned);
    if (reinterpret_cast<uintptr_t>(out) % sizeof(float) != 0) i = length;
    SumScalar(terms, count, 0, i, out, alsoOut);
  }
  for (; i + lanes <= length; i += lanes) {
    auto sum = hn::LoadU(d, terms[0] + i);
    for (size_t t = 1; t < count; ++t) sum = hn::Add(sum, hn::LoadU(d, terms[t] + i));
    if (kStream) {
      hn::Stream(sum, d, out + i);
    } else {
      hn::StoreU(sum, d, out + i);
    }
    if (alsoOut != nullptr) hn::StoreU(sum, d, alsoOut + i);
  }
  SumScalar(terms, count, i, length, out, alsoOut);
  if (kStream) hwy::FlushStream();  // streamed stores are weakly ordered: done before whatever follows
}

void SumInOrderOnTarget(const float* const* terms, size_t count, size_t length, float* out, float* alsoOut,
                        bool stream) {
  if (stream) {
    SumVectors<true>(terms, count, length, out, alsoOut);
  } else {
    SumVectors<false>(terms, count, length, out, alsoOut);
  }
}

const char* SumTargetNameOnTarget() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace gradagg
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gradagg {

HWY_EXPORT(SumInOrderOnTarget);
HWY_EXPORT(SumTargetNameOnTarget);

void SumInOrder(const float* const* terms, size_t count, size_t length, float* out, float* alsoOut, Stores stores) {
  if (count == 0 || length == 0) return;
  HWY_DYNAMIC_DISPATCH(SumInOrderOnTarget)(terms, count, length, out, alsoOut, stores == Stores::kStreamed);
}

const char* OrderedSumTarget() { return HWY_DYNAMIC_DISPATCH(SumTargetNameOnTarget)(); }

}  // namespace gradagg
#endif  // HWY_ONCE

// The element types gradients may have on a GPU: the public DataType (gradagg/device_gradient.h), under the name the
// kernels use. Sums and quantizer statistics are always float32.
#pragma once

#include <cstddef>

#include "gradagg/device_gradient.h"

namespace gradagg {

using ElementType = DataType;  // one enum for one idea

inline size_t ElementBytes(ElementType type) { return type == ElementType::kFloat32 ? 4 : 2; }

inline const char* ToString(ElementType type) {
  switch (type) {
    case ElementType::kBFloat16:
      return "bfloat16";
    case ElementType::kFloat16:
      return "float16";
    case ElementType::kFloat32:
      break;
  }
  return "float32";
}

}  // namespace gradagg

// The trainer built without CUDA.
#include <stdexcept>

#include "model.h"

namespace gradagg::train {

std::unique_ptr<Model> MakeCudaModel(int) {
  throw std::runtime_error("--device cuda: this train was built without CUDA");
}

}  // namespace gradagg::train

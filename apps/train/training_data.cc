#include "training_data.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

#include "idx_reader.h"
#include "mlp.h"

namespace gradagg::train {

Dataset LoadDataset(const std::string& directory, const std::string& prefix, size_t subset) {
  const IdxImages images = ReadIdxImages(FindIdxFile(directory, prefix + "-images-idx3-ubyte"));
  Dataset data;
  data.labels = ReadIdxLabels(FindIdxFile(directory, prefix + "-labels-idx1-ubyte"));
  if (images.rows * images.cols != Mlp::kInputs || images.count != data.labels.size()) {
    throw std::runtime_error(directory + ": " + prefix + " images are " + std::to_string(images.rows) + "x" +
                             std::to_string(images.cols) + " (" + std::to_string(images.count) + ") for " +
                             std::to_string(data.labels.size()) + " labels; expected 28x28, one label each");
  }
  const size_t count = subset > 0 ? std::min(subset, data.labels.size()) : data.labels.size();
  data.labels.resize(count);
  data.images.resize(count * Mlp::kInputs);
  for (size_t i = 0; i < data.images.size(); ++i) data.images[i] = images.pixels[i] / 255.0f;
  return data;
}

std::vector<size_t> EpochOrder(size_t count, uint64_t seed, int epoch) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed * 1000003 + static_cast<uint64_t>(epoch)));
  return order;
}

void SliceBatch(const Dataset& data, const std::vector<size_t>& order, size_t step, int rank, int ranks, size_t batch,
                float* images, uint8_t* labels) {
  const size_t first = (step * static_cast<size_t>(ranks) + static_cast<size_t>(rank)) * batch;
  for (size_t s = 0; s < batch; ++s) {
    const size_t index = order[first + s];
    std::copy_n(data.images.begin() + static_cast<std::ptrdiff_t>(index * Mlp::kInputs), Mlp::kInputs,
                images + s * Mlp::kInputs);
    labels[s] = data.labels[index];
  }
}

}  // namespace gradagg::train

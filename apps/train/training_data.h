// The trainer's data: Fashion-MNIST in memory, the shuffle of each epoch and each rank's slice of a global batch.
// The trainer and the serial reference of its local steps (test/train/local_steps_reference.cc) both read it
// through here, so that every simulated rank sees exactly the samples the distributed rank does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gradagg::train {

struct Dataset {
  std::vector<float> images;  // [count x 784], scaled to [0, 1]
  std::vector<uint8_t> labels;
  size_t count() const { return labels.size(); }
};

// `prefix` "train" or "t10k" in `directory`; the first `subset` samples (0: all). Throws std::runtime_error naming
// the file for a missing or malformed one.
Dataset LoadDataset(const std::string& directory, const std::string& prefix, size_t subset);

// The order in which epoch `epoch` (1-based) visits the samples: a fixed shuffle from `seed`.
std::vector<size_t> EpochOrder(size_t count, uint64_t seed, int epoch);

// Rank `rank` of `ranks` takes samples [(step * ranks + rank) * batch, ... + batch) of `order` in step `step` of
// the epoch: writes their images ([batch x 784]) and labels.
void SliceBatch(const Dataset& data, const std::vector<size_t>& order, size_t step, int rank, int ranks, size_t batch,
                float* images, uint8_t* labels);

}  // namespace gradagg::train

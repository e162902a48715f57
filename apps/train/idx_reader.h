// Reading the IDX files of (Fashion-)MNIST, plain or gzip-compressed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradagg::train {

struct IdxImages {
  uint32_t count = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major per image
};

// Throw std::runtime_error naming the file and what is wrong (missing, not IDX, truncated, corrupt).
IdxImages ReadIdxImages(const std::string& path);
std::vector<uint8_t> ReadIdxLabels(const std::string& path);

// `directory`/`name` if it exists, else `directory`/`name`.gz; throws naming both when neither does.
std::string FindIdxFile(const std::string& directory, const std::string& name);

}  // namespace gradagg::train

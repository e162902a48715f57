// Helpers shared by the multi-rank tests.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace gradagg::test {

inline int WorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int WorldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The emulated layout a CTest entry asks for (GRADAGG_TEST_RANKS_PER_NODE; 0 = one node per host).
inline int TestRanksPerNode() {
  const char* text = std::getenv("GRADAGG_TEST_RANKS_PER_NODE");
  return text != nullptr ? std::atoi(text) : 0;
}

inline std::vector<float> RandomGradient(size_t count, uint32_t seed, int rank) {
  std::mt19937 generator(seed * 7919u + static_cast<uint32_t>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(generator);
  return values;
}

inline std::vector<std::vector<float>> AllInputs(size_t count, uint32_t seed) {
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < WorldSize(); ++r) inputs.push_back(RandomGradient(count, seed, r));
  return inputs;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// True on every rank when every rank holds the same bytes.
inline bool IdenticalOnAllRanks(const std::vector<float>& values) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  uint64_t lowest = 0;
  uint64_t highest = 0;
  MPI_Allreduce(&hash, &lowest, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&hash, &highest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lowest == highest;
}

}  // namespace gradagg::test

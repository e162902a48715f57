// What the GPU node tests share: their configuration, and the oracle: every rank's input drawn from a seed, the
// node's sum in local-rank order computed on the host (first term assigned, the others added in rank order, one
// float32 rounding each, rounded to the element type once), and one allreduce checked against it bitwise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/cuda/device_memory.h"
#include "common/element_type.h"
#include "intra_node/gpu_node.h"
#include "test/mpi/mpi_test_support.h"

namespace gradagg::test {

// The environment's GRADAGG_NVLINK_* settings (blocks, layout), then the test's own.
inline GpuNodeConfig NodeConfig(size_t oneShotMaxBytes, int forcedGroupSize = 0, double timeout = 20.0) {
  GpuNodeConfig config = GpuNodeConfigFromEnvironment();
  config.group.oneShotMaxBytes = oneShotMaxBytes;
  config.group.packetMaxBytes = 0;  // tests that want the packet or line two-shot ask for it
  config.group.lineMaxBytes = 0;
  // The one-shot in packets unless a test asks for lines.
  config.group.oneShotLinesAbove = nvlink::kNever;
  config.group.stagingBytes = 1 << 20;  // small, so staged calls take several chunks
  config.group.timeoutSeconds = timeout;
  config.forcedGroupSize = forcedGroupSize;
  return config;
}

// bits[i] = v rounded to the element type.
inline void SetElement(std::vector<uint8_t>& bits, size_t i, ElementType type, float v) {
  if (type == ElementType::kFloat32) {
    std::memcpy(&bits[i * 4], &v, 4);
  } else if (type == ElementType::kBFloat16) {
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    std::memcpy(&bits[i * 2], &h, 2);
  } else {
    const __half h = __float2half_rn(v);
    std::memcpy(&bits[i * 2], &h, 2);
  }
}

// Host bits of rank r's input: random normals rounded to the element type.
inline std::vector<uint8_t> InputBits(size_t count, ElementType type, int rank, uint32_t seed) {
  std::mt19937 generator(seed * 7919u + static_cast<uint32_t>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> bits(count * ElementBytes(type));
  for (size_t i = 0; i < count; ++i) SetElement(bits, i, type, normal(generator));
  return bits;
}

inline float Element(const std::vector<uint8_t>& bits, size_t i, ElementType type) {
  if (type == ElementType::kFloat32) {
    float v;
    std::memcpy(&v, &bits[i * 4], 4);
    return v;
  }
  if (type == ElementType::kBFloat16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &bits[i * 2], 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &bits[i * 2], 2);
  return __half2float(h);
}

// The oracle: first term assigned, the others added in rank order, one float32 rounding each, then rounded once.
inline std::vector<uint8_t> RankOrderSum(size_t begin, size_t count, ElementType type, int ranks, uint32_t seed,
                                         size_t total) {
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(InputBits(total, type, r, seed));
  std::vector<uint8_t> out(count * ElementBytes(type));
  for (size_t i = 0; i < count; ++i) {
    float acc = Element(inputs[0], begin + i, type);
    for (int r = 1; r < ranks; ++r) acc = acc + Element(inputs[r], begin + i, type);
    SetElement(out, i, type, acc);
  }
  return out;
}

inline bool SameOnAllRanks(const std::vector<uint8_t>& bits) {
  uint64_t hash = 1469598103934665603ull;
  for (uint8_t b : bits) hash = (hash ^ b) * 1099511628211ull;
  std::vector<uint64_t> all(WorldSize());
  MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t h : all)
    if (h != all[0]) return false;
  return true;
}

struct Case {
  size_t count;
  ElementType type;
  size_t inputShift;   // elements past the buffer's start: unaligned pointers
  size_t outputShift;  // SIZE_MAX: in place
};

// Runs one allreduce from fresh buffers (registered or not) and compares with the oracle.
inline void CheckAllReduce(GpuNode& node, const Case& c, bool registered, uint32_t seed, cudaStream_t stream) {
  const size_t bytes = ElementBytes(c.type);
  const bool inPlace = c.outputShift == SIZE_MAX;
  DeviceBuffer in((c.count + c.inputShift + 8) * bytes), out((c.count + (inPlace ? 0 : c.outputShift) + 8) * bytes);
  char* input = in.as<char>() + c.inputShift * bytes;
  char* output = inPlace ? input : out.as<char>() + c.outputShift * bytes;
  if (registered) {
    node.Register(in.get(), in.bytes());
    if (!inPlace) node.Register(out.get(), out.bytes());
  }
  const std::vector<uint8_t> mine = InputBits(c.count, c.type, WorldRank(), seed);
  if (c.count > 0) ASSERT_EQ(cudaMemcpy(input, mine.data(), mine.size(), cudaMemcpyHostToDevice), cudaSuccess);
  if (!inPlace) ASSERT_EQ(cudaMemset(out.get(), 0xff, out.bytes()), cudaSuccess);  // poison
  node.AllReduce(input, output, c.count, c.type, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  node.ThrowIfFailed();
  std::vector<uint8_t> result(c.count * bytes);
  if (c.count > 0) ASSERT_EQ(cudaMemcpy(result.data(), output, result.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  if (!inPlace) {  // the 8 elements after the output are still the poison: nothing was stored past its end
    std::vector<uint8_t> tail(8 * bytes);
    ASSERT_EQ(cudaMemcpy(tail.data(), output + c.count * bytes, tail.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(tail, std::vector<uint8_t>(tail.size(), 0xff)) << "count " << c.count << ": a store past the end";
  }
  const std::vector<uint8_t> expected = RankOrderSum(0, c.count, c.type, WorldSize(), seed, c.count);
  size_t wrong = 0, first = SIZE_MAX;
  for (size_t i = 0; i < c.count; ++i)
    if (std::memcmp(&result[i * bytes], &expected[i * bytes], bytes) != 0 && wrong++ == 0) first = i;
  EXPECT_EQ(wrong, 0u) << "count " << c.count << " " << ToString(c.type) << (registered ? " registered" : "")
                       << " shifts " << c.inputShift << "/" << c.outputShift << ": first wrong element " << first;
  EXPECT_TRUE(SameOnAllRanks(result));
  if (registered) {
    if (!inPlace) node.Deregister(out.get());
    node.Deregister(in.get());
  }
}

inline const ElementType kTypes[] = {ElementType::kFloat32, ElementType::kBFloat16, ElementType::kFloat16};
inline const size_t kCounts[] = {0, 1, 3, 7, 8, 1000, 65537, 1000003};

}  // namespace gradagg::test

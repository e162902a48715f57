// Probe: an allreduce whose NVLink traffic all goes by copy engines, in one process driving every GPU (a host thread
// each). Per piece k of every shard: each GPU copies peer j's part of its input into j's inbox (a stream per peer,
// a fenced cuStreamWriteValue64 to j's flag after it); each owner's sum stream waits for its peers' flags, sums the
// piece into its output, tells the senders the inbox slot is free, and the gather streams copy the result to every
// peer's output. Inbox: two slots a sender. Prints the time of a 1 GiB (per GPU) allreduce, the best of 5, and
// checks every element (integer-valued floats, so the sum is exact).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e = (x);                                                                      \
    if (e != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CKD(x)                                                                \
  do {                                                                        \
    CUresult e = (x);                                                         \
    if (e != CUDA_SUCCESS) {                                                  \
      std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, (int)e); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

constexpr int kMax = 8;
static int G;
static size_t N;  // bytes per GPU
struct Gpu {
  float* input;
  float* output;
  float* inbox;                  // [2][G][slot floats]
  unsigned long long* arrived;   // [G][2]: from sender i, by piece parity (one stream each may run ahead)
  unsigned long long* consumed;  // [G]: pieces owner j has summed from my pushes
  cudaStream_t scatter[kMax][2], gather[kMax], sum;
  std::vector<cudaEvent_t> summed;
};
static Gpu gpu[kMax];
static unsigned long long epoch = 0;  // flags only grow across calls

__global__ void SumPiece(const float4* own, const float4* inbox, int senders, size_t slotVectors, float4* out,
                         size_t vectors) {
  for (size_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += (size_t)gridDim.x * blockDim.x) {
    float4 a = own[v];
    for (int s = 0; s < senders; ++s) {
      const float4 b = __ldcg(inbox + s * slotVectors + v);
      a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
    }
    out[v] = a;
  }
}

__global__ void Fill(float* p, size_t n, int rank) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = static_cast<float>((i % 7) + rank);
}

// One call on GPU me: P pieces, `streams` scatter streams per peer (pieces alternate between them).
static void Call(int me, int P, int streams) {
  CK(cudaSetDevice(me));
  Gpu& g = gpu[me];
  const size_t shard = N / 4 / G, piece = shard / P, slot = piece;  // floats
  const int peers = G - 1;
  const unsigned long long base = epoch;
  for (int k = 0; k < P; ++k) {
    for (int d = 1; d < G; ++d) {
      const int j = (me + d) % G;
      cudaStream_t s = g.scatter[j][k % streams];
      if (k >= 2) CKD(cuStreamWaitValue64((CUstream)s, (CUdeviceptr)&g.consumed[j], base + k - 1, CU_STREAM_WAIT_VALUE_GEQ));
      const int slotOfMe = me < j ? me : me - 1;
      float* to = gpu[j].inbox + ((size_t)(k % 2) * peers + slotOfMe) * slot;
      CK(cudaMemcpyAsync(to, g.input + (size_t)j * shard + (size_t)k * piece, piece * 4, cudaMemcpyDeviceToDevice, s));
      CKD(cuStreamWriteValue64((CUstream)s, (CUdeviceptr)&gpu[j].arrived[me * 2 + k % 2], base + k + 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    }
    for (int i = 0; i < G; ++i)
      if (i != me) CKD(cuStreamWaitValue64((CUstream)g.sum, (CUdeviceptr)&g.arrived[i * 2 + k % 2], base + k + 1, CU_STREAM_WAIT_VALUE_GEQ));
    float* result = g.output + (size_t)me * shard + (size_t)k * piece;
    SumPiece<<<132, 512, 0, g.sum>>>((const float4*)(g.input + (size_t)me * shard + (size_t)k * piece),
                                      (const float4*)(g.inbox + (size_t)(k % 2) * peers * slot), peers, slot / 4,
                                      (float4*)result, piece / 4);
    CK(cudaGetLastError());
    for (int i = 0; i < G; ++i)
      if (i != me) CKD(cuStreamWriteValue64((CUstream)g.sum, (CUdeviceptr)&gpu[i].consumed[me], base + k + 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    CK(cudaEventRecord(g.summed[k], g.sum));
    for (int d = 1; d < G; ++d) {
      const int q = (me + d) % G;
      CK(cudaStreamWaitEvent(g.gather[q], g.summed[k], 0));
      CK(cudaMemcpyAsync(gpu[q].output + (size_t)me * shard + (size_t)k * piece, result, piece * 4,
                         cudaMemcpyDeviceToDevice, g.gather[q]));
    }
  }
}

static double Run(int P, int streams) {
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaDeviceSynchronize());
    gpu[i].summed.resize(std::max<size_t>(gpu[i].summed.size(), P));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < G; ++i) threads.emplace_back(Call, i, P, streams);
  for (auto& t : threads) t.join();
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaDeviceSynchronize());
  }
  auto t1 = std::chrono::steady_clock::now();
  epoch += P;
  return std::chrono::duration<double>(t1 - t0).count();
}

static bool Check() {
  const size_t n = N / 4;
  std::vector<float> host(n);
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaMemcpy(host.data(), gpu[i].output, N, cudaMemcpyDeviceToHost));
    for (size_t x = 0; x < n; ++x) {
      const float want = static_cast<float>(G * (x % 7) + G * (G - 1) / 2);
      if (host[x] != want) {
        std::printf("GPU %d element %zu: %g, want %g\n", i, x, host[x], want);
        return false;
      }
    }
  }
  return true;
}

int main(int argc, char** argv) {
  CK(cudaGetDeviceCount(&G));
  if (G > kMax) G = kMax;
  N = (size_t)(argc > 1 ? std::atol(argv[1]) : 1024) << 20;
  std::printf("GPUs %d, %zu MiB per GPU\n", G, N >> 20);
  const int maxPieces = 32;
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    for (int j = 0; j < G; ++j)
      if (j != i) CK(cudaDeviceEnablePeerAccess(j, 0));
    Gpu& g = gpu[i];
    CK(cudaMalloc(&g.input, N));
    CK(cudaMalloc(&g.output, N));
    CK(cudaMalloc(&g.inbox, 2 * (G - 1) * (N / 4 / G) * sizeof(float)));  // two slots of a one-piece shard
    CK(cudaMalloc(&g.arrived, 2 * kMax * 8));
    CK(cudaMalloc(&g.consumed, kMax * 8));
    CK(cudaMemset(g.arrived, 0, 2 * kMax * 8));
    CK(cudaMemset(g.consumed, 0, kMax * 8));
    for (int j = 0; j < G; ++j) {
      CK(cudaStreamCreateWithFlags(&g.scatter[j][0], cudaStreamNonBlocking));
      CK(cudaStreamCreateWithFlags(&g.scatter[j][1], cudaStreamNonBlocking));
      CK(cudaStreamCreateWithFlags(&g.gather[j], cudaStreamNonBlocking));
    }
    CK(cudaStreamCreateWithFlags(&g.sum, cudaStreamNonBlocking));
    g.summed.resize(maxPieces);
    for (auto& ev : g.summed) CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    Fill<<<264, 512>>>(g.input, N / 4, i);
    CK(cudaDeviceSynchronize());
  }
  Run(4, 1);
  std::printf("correct: %s\n", Check() ? "yes" : "NO");
  for (int rep = 0; rep < 2; ++rep)
    for (int streams : {1, 2})
      for (int P : {2, 4, 8, 16, 32}) {
        double best = 1e9;
        for (int k = 0; k < 5; ++k) best = std::min(best, Run(P, streams));
        const double busbw = 2.0 * (G - 1) / G * N / best / 1e9;
        std::printf("pieces %2d, %d stream(s) a peer: %7.0f us, busbw %.1f GB/s\n", P, streams, best * 1e6, busbw);
      }
  std::printf("correct after all: %s\n", Check() ? "yes" : "NO");
  return 0;
}

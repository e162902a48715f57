// Probe: how fast do the copy engines push to every peer at once, against SM stores, on one node.
// One process, every visible GPU. Prints per-GPU egress in GB/s (bytes leaving a GPU / time).
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e = (x);                                                                  \
    if (e != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
#define CKD(x)                                                          \
  do {                                                                  \
    CUresult e = (x);                                                   \
    if (e != CUDA_SUCCESS) {                                            \
      std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, (int)e); \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

static int G;
static size_t S;  // bytes per peer
static std::vector<char*> src, dst;  // src[i]: G*S on GPU i; dst[j]: G*S on GPU j (slot i from sender i)
static std::vector<float*> hbmA, hbmB;
static std::vector<unsigned long long*> flags;  // on GPU j, G entries
static std::vector<std::vector<cudaStream_t>> streams;  // [i][j]

__global__ void PushAll(const uint4* src, uint4* const* dsts, int ndst, size_t vectors) {
  // block b takes vector slices; stores to every destination in a rotated order
  for (int k = 0; k < ndst; ++k) {
    int d = (k + blockIdx.x) % ndst;
    uint4* out = dsts[d];
    const uint4* in = src + d * vectors;
    for (size_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += (size_t)gridDim.x * blockDim.x * 4) {
      uint4 a[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        size_t w = v + (size_t)u * gridDim.x * blockDim.x;
        if (w < vectors) a[u] = in[w];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        size_t w = v + (size_t)u * gridDim.x * blockDim.x;
        if (w < vectors) out[w] = a[u];
      }
    }
  }
}

__global__ void HbmLoad(const float4* a, float4* b, size_t n, int reps) {
  for (int r = 0; r < reps; ++r)
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
      float4 x = a[i];
      x.x += 1.f;
      b[i] = x;
    }
}

static void SyncAll() {
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaDeviceSynchronize());
  }
}

enum Pattern { kAllToAll, kRing, kOnePair };

static bool Sends(Pattern p, int i, int j) {
  if (i == j) return false;
  if (p == kAllToAll) return true;
  if (p == kRing) return j == (i + 1) % G;
  return i == 0 && j == 1;
}

// chunks > 1: each pair's copy in pieces, a fenced cuStreamWriteValue64 to the receiver's flag after each.
static double CeRound(Pattern p, int chunks, bool load) {
  SyncAll();
  if (load)
    for (int i = 0; i < G; ++i) {
      CK(cudaSetDevice(i));
      HbmLoad<<<132, 512, 0, streams[i][i]>>>((const float4*)hbmA[i], (float4*)hbmB[i], (size_t)256 << 20 >> 4, 1000);
      CK(cudaGetLastError());
    }
  auto t0 = std::chrono::steady_clock::now();
  size_t piece = S / chunks;
  for (int c = 0; c < chunks; ++c)
    for (int i = 0; i < G; ++i)
      for (int jj = 1; jj < G; ++jj) {
        int j = (i + jj) % G;
        if (!Sends(p, i, j)) continue;
        CK(cudaSetDevice(i));
        CK(cudaMemcpyPeerAsync(dst[j] + (size_t)i * S + c * piece, j, src[i] + (size_t)j * S + c * piece, i, piece,
                               streams[i][j]));
        if (chunks > 1)
          CKD(cuStreamWriteValue64((CUstream)streams[i][j], (CUdeviceptr)(flags[j] + i), c + 1, 0));
      }
  for (int i = 0; i < G; ++i)
    for (int j = 0; j < G; ++j)
      if (i != j) CK(cudaStreamSynchronize(streams[i][j]));
  auto t1 = std::chrono::steady_clock::now();
  SyncAll();
  return std::chrono::duration<double>(t1 - t0).count();
}

// Every GPU writes to rank + s for s = 1 .. G-1, one kernel per step in its stream: a ring permutation at a time.
static double SmPhased() {
  std::vector<std::vector<uint4**>> tables(G, std::vector<uint4**>(G));
  SyncAll();
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    for (int step = 1; step < G; ++step) {
      uint4* d = (uint4*)(dst[(i + step) % G] + (size_t)i * S);
      CK(cudaMalloc(&tables[i][step], sizeof(uint4*)));
      CK(cudaMemcpy(tables[i][step], &d, sizeof(uint4*), cudaMemcpyHostToDevice));
    }
  }
  SyncAll();
  auto t0 = std::chrono::steady_clock::now();
  for (int step = 1; step < G; ++step)
    for (int i = 0; i < G; ++i) {
      CK(cudaSetDevice(i));
      PushAll<<<132, 512, 0, streams[i][i]>>>((const uint4*)src[i], tables[i][step], 1, S / 16);
      CK(cudaGetLastError());
    }
  SyncAll();
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    for (int step = 1; step < G; ++step) CK(cudaFree(tables[i][step]));
  }
  return std::chrono::duration<double>(t1 - t0).count();
}

static double SmRound(Pattern p) {
  std::vector<uint4**> tables(G);
  SyncAll();
  std::vector<int> counts(G);
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    std::vector<uint4*> d;
    for (int jj = 1; jj < G; ++jj) {
      int j = (i + jj) % G;
      if (Sends(p, i, j)) d.push_back((uint4*)(dst[j] + (size_t)i * S));
    }
    // src for destination k is at src[i] + k*S (any distinct region)
    CK(cudaMalloc(&tables[i], d.size() * sizeof(uint4*)));
    CK(cudaMemcpy(tables[i], d.data(), d.size() * sizeof(uint4*), cudaMemcpyHostToDevice));
    counts[i] = (int)d.size();
  }
  SyncAll();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < G; ++i) {
    if (counts[i] == 0) continue;
    CK(cudaSetDevice(i));
    PushAll<<<132, 512, 0, streams[i][i]>>>((const uint4*)src[i], tables[i], counts[i], S / 16);
    CK(cudaGetLastError());
  }
  SyncAll();
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaFree(tables[i]));
  }
  return std::chrono::duration<double>(t1 - t0).count();
}

int main(int argc, char** argv) {
  CK(cudaGetDeviceCount(&G));
  S = (argc > 1 ? std::atol(argv[1]) : 256) << 20;
  std::printf("GPUs %d, %zu MiB per peer\n", G, S >> 20);
  src.resize(G), dst.resize(G), hbmA.resize(G), hbmB.resize(G), flags.resize(G);
  streams.assign(G, std::vector<cudaStream_t>(G));
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    for (int j = 0; j < G; ++j) {
      if (j != i) CK(cudaDeviceEnablePeerAccess(j, 0));
      CK(cudaStreamCreateWithFlags(&streams[i][j], cudaStreamNonBlocking));
    }
    CK(cudaMalloc(&src[i], G * S));
    CK(cudaMalloc(&dst[i], G * S));
    CK(cudaMemset(src[i], 1, G * S));
    CK(cudaMalloc(&hbmA[i], 256 << 20));
    CK(cudaMalloc(&hbmB[i], 256 << 20));
    CK(cudaMalloc(&flags[i], G * sizeof(unsigned long long)));
  }
  const char* names[] = {"all-to-all", "ring", "one pair"};
  for (int rep = 0; rep < 2; ++rep) {
    for (int p = 0; p < 3; ++p) {
      const Pattern pat = static_cast<Pattern>(p);
      const int peers = pat == kAllToAll ? G - 1 : 1;
      const double bytes = double(peers) * S;
      double best = 1e9;
      for (int k = 0; k < 5; ++k) best = std::min(best, CeRound(pat, 1, false));
      std::printf("CE  %-10s one copy    %7.1f GB/s egress per sender (%.0f us)\n", names[p], bytes / best / 1e9,
                  best * 1e6);
      if (pat == kAllToAll) {
        for (int chunks : {8, 32}) {
          best = 1e9;
          for (int k = 0; k < 5; ++k) best = std::min(best, CeRound(pat, chunks, false));
          std::printf("CE  %-10s %2d chunks+flag %7.1f GB/s (%.0f us)\n", names[p], chunks, bytes / best / 1e9,
                      best * 1e6);
        }
        best = 1e9;
        for (int k = 0; k < 3; ++k) best = std::min(best, CeRound(pat, 1, true));
        std::printf("CE  %-10s under HBM load %7.1f GB/s (%.0f us)\n", names[p], bytes / best / 1e9, best * 1e6);
      }
      best = 1e9;
      for (int k = 0; k < 5; ++k) best = std::min(best, SmRound(pat));
      std::printf("SM  %-10s 132x512     %7.1f GB/s (%.0f us)\n", names[p], bytes / best / 1e9, best * 1e6);
      if (pat == kAllToAll) {
        best = 1e9;
        for (int k = 0; k < 5; ++k) best = std::min(best, SmPhased());
        std::printf("SM  %-10s phased, a ring per step %7.1f GB/s (%.0f us)\n", names[p], bytes / best / 1e9,
                    best * 1e6);
      }
    }
  }
  return 0;
}

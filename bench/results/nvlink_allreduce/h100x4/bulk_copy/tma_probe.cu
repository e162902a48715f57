// Probe: bulk copies (the tensor memory accelerator, cp.async.bulk) to peers against SM stores and the copy engines,
// on one node. One process, every visible GPU. Prints per-GPU egress in GB/s (bytes leaving a GPU / time).
// The copy-engine and SM rounds are ../copy_gather/ce_probe.cu's, included here with its main renamed out of the way.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -o tma_probe tma_probe.cu -lcuda; run: ./tma_probe 256

#define main CeProbeMain
#include "../copy_gather/ce_probe.cu"
#undef main

__device__ __forceinline__ unsigned SmemAddr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void WaitParity(unsigned bar, unsigned parity) {
  unsigned ok = 0;
  while (!ok)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
}

// One thread per block moves pieces with the tensor memory accelerator: bulk load local -> shared, bulk store
// shared -> the destination (a peer's memory). Block b takes pieces b, b + B, ... of every destination, destinations
// rotated by block and piece as all-push does.
constexpr int kStages = 4;
__global__ void TmaPush(const char* src, char* const* dsts, int ndst, size_t bytesPerDst, unsigned piece) {
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) unsigned long long bars[kStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SmemAddr(&bars[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const size_t piecesPerDst = bytesPerDst / piece;
  const size_t mine = piecesPerDst > blockIdx.x ? (piecesPerDst - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const size_t n = mine * ndst;
  auto where = [&](size_t i, const char*& from, char*& to) {
    const size_t k = blockIdx.x + (i / ndst) * gridDim.x;
    const int d = static_cast<int>((i + blockIdx.x) % ndst);
    from = src + d * bytesPerDst + k * piece;
    to = dsts[d] + k * piece;
  };
  auto load = [&](size_t i) {
    const int s = static_cast<int>(i % kStages);
    const char* from;
    char* to;
    where(i, from, to);
    const unsigned bar = SmemAddr(&bars[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(piece) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     SmemAddr(smem + s * piece)),
                 "l"(from), "r"(piece), "r"(bar)
                 : "memory");
  };
  for (size_t i = 0; i + 1 < kStages && i < n; ++i) load(i);
  for (size_t i = 0; i < n; ++i) {
    const int s = static_cast<int>(i % kStages);
    WaitParity(SmemAddr(&bars[s]), static_cast<unsigned>((i / kStages) & 1));
    const char* from;
    char* to;
    where(i, from, to);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(to), "r"(SmemAddr(smem + s * piece)),
                 "r"(piece)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (i + kStages - 1 < n) {
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");  // store i - 1 has read its stage
      load(i + kStages - 1);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// SM stores with TmaPush's work split: the whole block copies a contiguous piece at a time, 8 vectors a thread in flight.
__global__ void __launch_bounds__(512) SmPiecePush(const char* src, char* const* dsts, int ndst, size_t bytesPerDst,
                                                   unsigned piece) {
  const size_t piecesPerDst = bytesPerDst / piece;
  const size_t mine = piecesPerDst > blockIdx.x ? (piecesPerDst - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const size_t n = mine * ndst, vectors = piece / 16;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = blockIdx.x + (i / ndst) * gridDim.x;
    const int d = static_cast<int>((i + blockIdx.x) % ndst);
    const uint4* from = reinterpret_cast<const uint4*>(src + d * bytesPerDst + k * piece);
    uint4* to = reinterpret_cast<uint4*>(dsts[d] + k * piece);
    for (size_t first = threadIdx.x; first < vectors; first += 8 * blockDim.x) {
      uint4 a[8];
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (first + u * blockDim.x < vectors) a[u] = from[first + u * blockDim.x];
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (first + u * blockDim.x < vectors) to[first + u * blockDim.x] = a[u];
    }
  }
}

static std::vector<uint4**> Tables(Pattern p, std::vector<int>& counts, int step = 0) {
  std::vector<uint4**> tables(G);
  counts.assign(G, 0);
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    std::vector<uint4*> d;
    for (int jj = 1; jj < G; ++jj) {
      int j = (i + jj) % G;
      if (step ? jj == step : Sends(p, i, j)) d.push_back((uint4*)(dst[j] + (size_t)i * S));
    }
    CK(cudaMalloc(&tables[i], d.size() * sizeof(uint4*) + 8));
    CK(cudaMemcpy(tables[i], d.data(), d.size() * sizeof(uint4*), cudaMemcpyHostToDevice));
    counts[i] = (int)d.size();
  }
  return tables;
}

static void FreeTables(std::vector<uint4**>& t) {
  for (int i = 0; i < G; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaFree(t[i]));
  }
}

static bool gSmPieces = false;
static void LaunchTma(int i, uint4** table, int count, int blocks, unsigned piece) {
  CK(cudaSetDevice(i));
  if (gSmPieces) {
    SmPiecePush<<<blocks, 512, 0, streams[i][i]>>>(src[i], (char* const*)table, count, S, piece);
    CK(cudaGetLastError());
    return;
  }
  TmaPush<<<blocks, 32, kStages * piece, streams[i][i]>>>(src[i], (char* const*)table, count, S, piece);
  CK(cudaGetLastError());
}

// phased: one kernel per step s in which every GPU writes only to rank + s.
static double TmaRound(Pattern p, int blocks, unsigned piece, bool phased) {
  std::vector<int> counts;
  std::vector<std::vector<uint4**>> tables;
  std::vector<std::vector<int>> allCounts;
  if (phased)
    for (int step = 1; step < G; ++step) {
      tables.push_back(Tables(p, counts, step));
      allCounts.push_back(counts);
    }
  else {
    tables.push_back(Tables(p, counts));
    allCounts.push_back(counts);
  }
  SyncAll();
  auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < tables.size(); ++k)
    for (int i = 0; i < G; ++i)
      if (allCounts[k][i]) LaunchTma(i, tables[k][i], allCounts[k][i], blocks, piece);
  SyncAll();
  auto t1 = std::chrono::steady_clock::now();
  for (auto& t : tables) FreeTables(t);
  return std::chrono::duration<double>(t1 - t0).count();
}

static bool CheckCopies() {  // dst[j] slot i == src[i] region j after an all-to-all
  bool ok = true;
  std::vector<char> a(S), b(S);
  for (int i = 0; i < G && ok; ++i)
    for (int j = 0; j < G && ok; ++j) {
      if (i == j) continue;
      CK(cudaMemcpy(a.data(), src[i] + (size_t)((j - i - 1 + G) % G) * S, S, cudaMemcpyDefault));
      CK(cudaMemcpy(b.data(), dst[j] + (size_t)i * S, S, cudaMemcpyDefault));
      ok = a == b;
    }
  return ok;
}

__global__ void Fill(unsigned* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (unsigned)(i * 2654435761u) ^ seed;
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
    Fill<<<264, 512>>>((unsigned*)src[i], G * S / 4, 77u * i + 1);
    CK(cudaMemset(dst[i], 0, G * S));
    CK(cudaFuncSetAttribute(TmaPush, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  }
  SyncAll();
  // correctness first: a TMA all-to-all must land every byte
  TmaRound(kAllToAll, 132, 16 << 10, false);
  std::printf("TMA all-to-all copies correct: %s\n", CheckCopies() ? "yes" : "NO");
  CK(cudaSetDevice(0));
  for (int i = 0; i < G; ++i) { CK(cudaSetDevice(i)); CK(cudaMemset(dst[i], 0, G * S)); }
  gSmPieces = true;
  TmaRound(kAllToAll, 132, 128 << 10, false);
  gSmPieces = false;
  std::printf("SM piece all-to-all copies correct: %s\n", CheckCopies() ? "yes" : "NO");
  const char* names[] = {"all-to-all", "ring", "one pair"};
  auto best = [](auto f, int reps) {
    double b = 1e9;
    for (int k = 0; k < reps; ++k) b = std::min(b, f());
    return b;
  };
  for (int rep = 0; rep < 2; ++rep) {
    for (int p = 0; p < 3; ++p) {
      const Pattern pat = static_cast<Pattern>(p);
      const double bytes = double(pat == kAllToAll ? G - 1 : 1) * S;
      double t = best([&] { return CeRound(pat, 1, false); }, 5);
      std::printf("CE  %-10s one copy              %7.1f GB/s egress per sender (%.0f us)\n", names[p], bytes / t / 1e9, t * 1e6);
      t = best([&] { return SmRound(pat); }, 5);
      std::printf("SM  %-10s 132x512               %7.1f GB/s (%.0f us)\n", names[p], bytes / t / 1e9, t * 1e6);
      for (int blocks : {132, 264})
        for (unsigned piece : {4u << 10, 8u << 10, 16u << 10}) {
          if (pat != kAllToAll && (blocks != 132 || piece != (16u << 10))) continue;
          t = best([&] { return TmaRound(pat, blocks, piece, false); }, 5);
          std::printf("TMA %-10s %3d blocks, %2u KiB x%d %7.1f GB/s (%.0f us)\n", names[p], blocks, piece >> 10, kStages,
                      bytes / t / 1e9, t * 1e6);
        }
      gSmPieces = true;
      for (unsigned piece : {16u << 10, 128u << 10}) {
        t = best([&] { return TmaRound(pat, 132, piece, false); }, 5);
        std::printf("SMp %-10s 132x512, %3u KiB pieces %7.1f GB/s (%.0f us)\n", names[p], piece >> 10, bytes / t / 1e9, t * 1e6);
      }
      if (pat == kAllToAll) {
        t = best([&] { return TmaRound(pat, 132, 128u << 10, true); }, 5);
        std::printf("SMp %-10s phased, 128 KiB pieces %7.1f GB/s (%.0f us)\n", names[p], bytes / t / 1e9, t * 1e6);
      }
      gSmPieces = false;
      if (pat == kAllToAll) {
        t = best([&] { return SmPhased(); }, 5);
        std::printf("SM  %-10s phased                %7.1f GB/s (%.0f us)\n", names[p], bytes / t / 1e9, t * 1e6);
        t = best([&] { return TmaRound(pat, 132, 16u << 10, true); }, 5);
        std::printf("TMA %-10s phased 132, 16 KiB    %7.1f GB/s (%.0f us)\n", names[p], bytes / t / 1e9, t * 1e6);
      }
    }
  }
  return 0;
}

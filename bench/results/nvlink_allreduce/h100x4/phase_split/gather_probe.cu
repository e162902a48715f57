// Probe: an all-gather between processes (one per GPU, CUDA IPC mappings, as gradagg maps its peers), timed three
// ways: the copy engines (a stream per peer step, all three at once), the copy engines one peer step after another,
// and SM stores (every block storing its pieces to every peer in turn). Each rank owns shard `rank` of a buffer of
// ranks x S bytes and writes it into every peer's buffer at the same place. Prints, per way and size, the slowest
// rank's time (the median of 5 timings of one gather each) and the bytes leaving a GPU per second; then checks
// every byte of the last gather.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -o gather_probe gather_probe.cu -I$MPI/include -L$MPI/lib -lmpi
// Run:   mpirun -np 4 ./gather_probe 16 64 256   (shard sizes in MiB)
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e = (x);                                                                       \
    if (e != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                            \
    }                                                                                          \
  } while (0)

constexpr int kMaxRanks = 8;
struct Peers {
  uint4* at[kMaxRanks];
};

// Block b stores 16 KiB pieces b, b + B, ... of my shard to every peer, the peers in turn from a block's own start.
__global__ void __launch_bounds__(512) StoreGather(const uint4* mine, Peers peers, int rank, int ranks,
                                                   size_t vectors) {
  constexpr size_t kPiece = 1024;  // vectors: 16 KiB
  const size_t pieces = (vectors + kPiece - 1) / kPiece;
  for (size_t piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
    for (int k = 1; k < ranks; ++k) {
      const int q = (rank + 1 + static_cast<int>((k - 1 + piece) % (ranks - 1))) % ranks;
      uint4 data[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const size_t v = piece * kPiece + u * blockDim.x + threadIdx.x;
        if (v < vectors) data[u] = mine[v];
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const size_t v = piece * kPiece + u * blockDim.x + threadIdx.x;
        if (v < vectors) peers.at[q][v] = data[u];
      }
    }
  }
}

// Word i of the whole buffer (`first` is data's index in it) holds a hash of i and its owner's salt.
__global__ void Fill(uint32_t* data, size_t first, size_t words, uint32_t salt) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    data[i] = static_cast<uint32_t>((first + i) * 2654435761u) ^ salt;
}

__global__ void CountWrong(const uint32_t* data, size_t words, size_t shardWords, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t owner = static_cast<uint32_t>(i / shardWords);
    if (data[i] != (static_cast<uint32_t>(i * 2654435761u) ^ (owner + 1))) atomicAdd(wrong, 1ull);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2 || ranks > kMaxRanks) MPI_Abort(MPI_COMM_WORLD, 2);
  CK(cudaSetDevice(rank));
  std::vector<size_t> sizes;
  for (int a = 1; a < argc; ++a) sizes.push_back(std::strtoull(argv[a], nullptr, 10) << 20);
  if (sizes.empty()) sizes = {16 << 20, 64 << 20, 256 << 20};
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  char* buffer = nullptr;
  CK(cudaMalloc(&buffer, largest * ranks));
  cudaIpcMemHandle_t mine, all[kMaxRanks];
  CK(cudaIpcGetMemHandle(&mine, buffer));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  std::vector<char*> peer(ranks, nullptr);
  for (int p = 0; p < ranks; ++p) {
    if (p == rank) {
      peer[p] = buffer;
      continue;
    }
    void* mapped = nullptr;
    CK(cudaIpcOpenMemHandle(&mapped, all[p], cudaIpcMemLazyEnablePeerAccess));
    peer[p] = static_cast<char*>(mapped);
  }
  cudaStream_t main;
  CK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  std::vector<cudaStream_t> side(ranks);
  std::vector<cudaEvent_t> done(ranks);
  for (int k = 0; k < ranks; ++k) {
    CK(cudaStreamCreateWithFlags(&side[k], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
  }
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  // PROBE_CALLS: gathers per timing, back to back with nothing between them (1).
  const int calls = std::getenv("PROBE_CALLS") ? std::atoi(std::getenv("PROBE_CALLS")) : 1;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, rank));

  const char* ways[] = {"copy engines, all peers at once", "copy engines, a peer step at a time", "SM stores"};
  if (rank == 0)
    std::printf("# %d ranks; per way and shard size: the slowest rank, median of 5 timings of %d gathers\n", ranks, calls);
  for (size_t shard : sizes) {
    for (int way = 0; way < 3; ++way) {
      const auto gather = [&] {
        char* from = buffer + rank * shard;
        if (way == 2) {
          Peers peers{};
          for (int p = 0; p < ranks; ++p) peers.at[p] = reinterpret_cast<uint4*>(peer[p] + rank * shard);
          StoreGather<<<sms, 512, 0, main>>>(reinterpret_cast<const uint4*>(from), peers, rank, ranks, shard / 16);
          CK(cudaGetLastError());
          return;
        }
        CK(cudaEventRecord(done[0], main));
        for (int k = 1; k < ranks; ++k) {
          cudaStream_t s = way == 0 ? side[k] : side[1];
          CK(cudaStreamWaitEvent(s, done[0], 0));
          const int q = (rank + k) % ranks;
          CK(cudaMemcpyAsync(peer[q] + rank * shard, from, shard, cudaMemcpyDeviceToDevice, s));
        }
        for (int k = 1; k < ranks; ++k) {
          if (way == 1 && k > 1) break;
          CK(cudaEventRecord(done[k], side[k]));
          CK(cudaStreamWaitEvent(main, done[k], 0));
        }
      };
      CK(cudaDeviceSynchronize());
      Fill<<<sms, 512, 0, main>>>(reinterpret_cast<uint32_t*>(buffer), 0, shard * ranks / 4, 0);
      Fill<<<sms, 512, 0, main>>>(reinterpret_cast<uint32_t*>(buffer + rank * shard), rank * shard / 4, shard / 4,
                                  rank + 1);
      gather();  // warm-up
      std::vector<double> times;
      for (int r = 0; r < 5; ++r) {
        CK(cudaStreamSynchronize(main));
        MPI_Barrier(MPI_COMM_WORLD);
        CK(cudaEventRecord(start, main));
        for (int c = 0; c < calls; ++c) gather();
        CK(cudaEventRecord(stop, main));
        CK(cudaEventSynchronize(stop));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, start, stop));
        double us = ms * 1e3 / calls, slowest = 0;
        MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times.push_back(slowest);
      }
      std::sort(times.begin(), times.end());
      // Check: fresh fill of my shard's neighbours, one gather, every shard as its owner wrote it.
      CK(cudaStreamSynchronize(main));
      MPI_Barrier(MPI_COMM_WORLD);
      CK(cudaMemsetAsync(buffer, 0, shard * ranks, main));
      Fill<<<sms, 512, 0, main>>>(reinterpret_cast<uint32_t*>(buffer + rank * shard), rank * shard / 4, shard / 4,
                                  rank + 1);
      CK(cudaStreamSynchronize(main));
      MPI_Barrier(MPI_COMM_WORLD);
      gather();
      CK(cudaStreamSynchronize(main));
      MPI_Barrier(MPI_COMM_WORLD);
      unsigned long long* wrong = nullptr;
      CK(cudaMallocManaged(&wrong, sizeof *wrong));
      *wrong = 0;
      CountWrong<<<sms, 512, 0, main>>>(reinterpret_cast<const uint32_t*>(buffer), shard * ranks / 4, shard / 4, wrong);
      CK(cudaStreamSynchronize(main));
      unsigned long long total = 0, w = *wrong;
      MPI_Allreduce(&w, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      CK(cudaFree(wrong));
      if (rank == 0)
        std::printf("%-36s shard %5zu MiB: %9.1f us (%9.1f-%9.1f), %6.1f GB/s out of each GPU, wrong words %llu\n",
                    ways[way], shard >> 20, times[2], times[0], times[4],
                    double(shard) * (ranks - 1) / times[2] / 1e3, total);
    }
  }
  for (int p = 0; p < ranks; ++p)
    if (p != rank) CK(cudaIpcCloseMemHandle(peer[p]));
  CK(cudaFree(buffer));
  MPI_Finalize();
  return 0;
}

// Probe: an allreduce whose reduce-scatter moves on the copy engines and whose sums and all-gather run on the SMs,
// between processes (one per GPU, CUDA IPC mappings). For each rank, with shards of S bytes:
// 1. copies: a stream per peer step copies the peer's shard of my input into my slot of that peer's inbox
//    (inbox: ranks - 1 slots of S bytes, by sender);
// 2. a barrier kernel: every rank's copies have completed, so every inbox is full;
// 3. the gather kernel: sums my shard in rank order (mine from my input, the rest from my inbox, all local reads) and
//    stores the result into every rank's output, peers in turn per 16 KiB piece;
// 4. a barrier kernel: every rank's results are in my output.
// Also in 2-8 pieces: the copies of piece k + 1 go on during the sums and gather of piece k (two inbox halves).
// Prints the slowest rank's time (median of 5 single calls) for each way, and for one piece steps 1 + 2 and 3 + 4
// alone, and checks every element of a whole call (inputs are small integers: every sum is exact in float32).
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -o copy_scatter_probe copy_scatter_probe.cu $(mpicc --showme:compile)
//        $(mpicc --showme:link) -lcuda
// Run:   mpirun -np 4 ./copy_scatter_probe 64 256   (shard sizes in MiB)
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e = (x);                                                                       \
    if (e != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                            \
    }                                                                                          \
  } while (0)

#define CKD(x)                                                                                 \
  do {                                                                                         \
    CUresult e = (x);                                                                          \
    if (e != CUDA_SUCCESS) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, static_cast<int>(e));      \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                            \
    }                                                                                          \
  } while (0)

constexpr int kMaxRanks = 8;
struct Pointers {
  float4* at[kMaxRanks];
};
struct Flags {
  unsigned long long* at[kMaxRanks];  // rank p's flag array (kMaxRanks entries, by sender), mapped here
};

// One block, thread p < ranks: raise my flag on peer p to `value`, then wait for peer p's flag here to reach it.
__global__ void Barrier(Flags flags, int rank, int ranks, unsigned long long value) {
  const int p = threadIdx.x;
  if (p >= ranks || p == rank) return;
  __threadfence_system();
  volatile unsigned long long* theirs = flags.at[p] + rank;
  *theirs = value;
  volatile unsigned long long* mine = flags.at[rank] + p;
  unsigned long long began = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(began));
  while (*mine < value) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - began > 10000000000ull) {  // 10 s
      printf("rank %d: barrier %llu timed out waiting for %d\n", rank, value, p);
      __trap();
    }
  }
  __threadfence_system();
}

// The same with a pause between polls (PROBE_BARRIER=sleepy).
__global__ void SleepyBarrier(Flags flags, int rank, int ranks, unsigned long long value) {
  const int p = threadIdx.x;
  if (p >= ranks || p == rank) return;
  __threadfence_system();
  volatile unsigned long long* theirs = flags.at[p] + rank;
  *theirs = value;
  volatile unsigned long long* mine = flags.at[rank] + p;
  while (*mine < value) __nanosleep(2000);
  __threadfence_system();
}

__global__ void Empty() {}

// out_q[my piece] = input[my piece] summed with the inbox slots (`slotVectors` apart) in rank order, for every rank q.
// Block b takes kU x 8 KiB parts b, b + B, ...: loads every term of its kU vectors a thread, then stores the sums to
// every output in turn, from an output that rotates with the part.
template <int kU>
__global__ void __launch_bounds__(512) SumAndGather(const float4* mine, const float4* inbox, size_t slotVectors,
                                                    Pointers outputs, int rank, int ranks, size_t vectors) {
  const size_t part = static_cast<size_t>(kU) * blockDim.x;
  const size_t parts = (vectors + part - 1) / part;
  for (size_t k = blockIdx.x; k < parts; k += gridDim.x) {
    float4 sum[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t v = k * part + u * blockDim.x + threadIdx.x;
      if (v >= vectors) continue;
      float4 terms[kMaxRanks];
#pragma unroll
      for (int p = 0; p < kMaxRanks; ++p) {
        if (p >= ranks) break;
        const int slot = p < rank ? p : p - 1;
        terms[p] = p == rank ? mine[v] : __ldcg(inbox + slot * slotVectors + v);
      }
      sum[u] = terms[0];
      for (int p = 1; p < ranks; ++p) {
        sum[u].x += terms[p].x, sum[u].y += terms[p].y, sum[u].z += terms[p].z, sum[u].w += terms[p].w;
      }
    }
    for (int j = 0; j < ranks; ++j) {
      const int q = (rank + j + static_cast<int>(k % ranks)) % ranks;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const size_t v = k * part + u * blockDim.x + threadIdx.x;
        if (v < vectors) outputs.at[q][v] = sum[u];
      }
    }
  }
}

__device__ inline float Term(size_t i, int rank) { return static_cast<float>((i * 7 + rank * 13) % 1001); }

__global__ void Fill(float* data, size_t count, int rank) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    data[i] = Term(i, rank);
}

__global__ void CountWrong(const float* data, size_t count, int ranks, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    float expected = 0;
    for (int p = 0; p < ranks; ++p) expected += Term(i, p);
    if (data[i] != expected) atomicAdd(wrong, 1ull);
  }
}

template <typename T>
std::vector<T*> MapAll(T* mine, int rank, int ranks) {
  cudaIpcMemHandle_t handle, all[kMaxRanks];
  CK(cudaIpcGetMemHandle(&handle, mine));
  MPI_Allgather(&handle, sizeof handle, MPI_BYTE, all, sizeof handle, MPI_BYTE, MPI_COMM_WORLD);
  std::vector<T*> mapped(ranks, mine);
  for (int p = 0; p < ranks; ++p) {
    if (p == rank) continue;
    void* at = nullptr;
    CK(cudaIpcOpenMemHandle(&at, all[p], cudaIpcMemLazyEnablePeerAccess));
    mapped[p] = static_cast<T*>(at);
  }
  return mapped;
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
  if (sizes.empty()) sizes = {64 << 20, 256 << 20};
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  float *input = nullptr, *output = nullptr, *inbox = nullptr;
  unsigned long long* flags = nullptr;
  CK(cudaMalloc(&input, largest * ranks));
  CK(cudaMalloc(&output, largest * ranks));
  CK(cudaMalloc(&inbox, largest * (ranks - 1)));
  CK(cudaMalloc(&flags, 2 << 20));  // its own allocation: IPC maps whole allocations
  CK(cudaMemset(flags, 0, 2 << 20));
  const std::vector<float*> outputs = MapAll(output, rank, ranks), inboxes = MapAll(inbox, rank, ranks);
  // PROBE_CALLS: calls per timing, back to back (1); PROBE_EXPORT_INPUT=1: the input mapped by every peer too, as a
  // registered buffer is.
  const int calls = std::getenv("PROBE_CALLS") ? std::atoi(std::getenv("PROBE_CALLS")) : 1;
  if (std::getenv("PROBE_EXPORT_INPUT") && std::atoi(std::getenv("PROBE_EXPORT_INPUT")) == 1) MapAll(input, rank, ranks);
  const std::vector<unsigned long long*> flagArrays = MapAll(flags, rank, ranks);
  Flags barrierFlags{};
  for (int p = 0; p < ranks; ++p) barrierFlags.at[p] = flagArrays[p];
  cudaStream_t main;
  CK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  constexpr int kMaxPieces = 8;
  std::vector<cudaStream_t> side(ranks);
  std::vector<cudaEvent_t> copied(ranks * kMaxPieces), barred(kMaxPieces);
  for (int k = 0; k < ranks; ++k) CK(cudaStreamCreateWithFlags(&side[k], cudaStreamNonBlocking));
  for (cudaEvent_t& event : copied) CK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  for (cudaEvent_t& event : barred) CK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  cudaEvent_t start, stop, began;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  CK(cudaEventCreateWithFlags(&began, cudaEventDisableTiming));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, rank));
  unsigned long long barriers = 0;
  // PROBE_BARRIER: kernel (spinning, the default), sleepy (a kernel polling every 2 us), memop (stream memory
  // operations: a fenced write to every peer, then waits on the stream; no kernel), empty (an empty kernel: no
  // barrier, timing only), none (no barrier: timing only).
  const std::string barrierKind = std::getenv("PROBE_BARRIER") ? std::getenv("PROBE_BARRIER") : "kernel";
  const auto barrier = [&] {
    ++barriers;
    if (barrierKind == "kernel") {
      Barrier<<<1, kMaxRanks, 0, main>>>(barrierFlags, rank, ranks, barriers);
    } else if (barrierKind == "sleepy") {
      SleepyBarrier<<<1, kMaxRanks, 0, main>>>(barrierFlags, rank, ranks, barriers);
    } else if (barrierKind == "empty") {
      Empty<<<1, 32, 0, main>>>();
    } else if (barrierKind == "memop") {
      for (int p = 0; p < ranks; ++p)
        if (p != rank)
          CKD(cuStreamWriteValue64(main, reinterpret_cast<CUdeviceptr>(flagArrays[p] + rank), barriers,
                                   CU_STREAM_WRITE_VALUE_DEFAULT));
      for (int p = 0; p < ranks; ++p)
        if (p != rank)
          CKD(cuStreamWaitValue64(main, reinterpret_cast<CUdeviceptr>(flagArrays[rank] + p), barriers,
                                  CU_STREAM_WAIT_VALUE_GEQ));
    }
    CK(cudaGetLastError());
  };

  // One allreduce in `pieces` pieces. Piece k: the copies into inbox half k % 2 (after the barrier before piece k - 1's
  // sums: every rank has summed piece k - 2, so that half is free), a barrier once they are done (every rank's copies
  // of piece k have landed), the sums and gather of piece k, which run while the copies of piece k + 1 go on. A barrier
  // ends the call. Pieces 1: one half, no overlap.
  const auto allReduce = [&](size_t shard, int pieces, int unroll, bool doCopies, bool doSums) {
    const size_t piece = shard / pieces, pieceVectors = piece / 16;
    CK(cudaEventRecord(began, main));
    for (int k = 0; k < pieces; ++k) {
      const size_t half = static_cast<size_t>(k % 2) * (ranks - 1) * piece;  // the inbox half's offset
      for (int step = 1; step < ranks && doCopies; ++step) {
        const int q = (rank + step) % ranks;
        const int slot = rank < q ? rank : rank - 1;
        cudaEvent_t& done = copied[k * ranks + step];
        CK(cudaStreamWaitEvent(side[step], k == 0 ? began : barred[k - 1], 0));
        CK(cudaMemcpyAsync(reinterpret_cast<char*>(inboxes[q]) + half + slot * piece,
                           reinterpret_cast<char*>(input) + q * shard + k * piece, piece, cudaMemcpyDeviceToDevice,
                           side[step]));
        CK(cudaEventRecord(done, side[step]));
        CK(cudaStreamWaitEvent(main, done, 0));
      }
      barrier();
      CK(cudaEventRecord(barred[k], main));
      if (!doSums) continue;
      Pointers peers{};
      for (int p = 0; p < ranks; ++p)
        peers.at[p] = reinterpret_cast<float4*>(reinterpret_cast<char*>(outputs[p]) + rank * shard + k * piece);
      const float4* mine = reinterpret_cast<const float4*>(reinterpret_cast<char*>(input) + rank * shard + k * piece);
      const float4* from = reinterpret_cast<const float4*>(reinterpret_cast<char*>(inbox) + half);
      if (unroll == 2) {
        SumAndGather<2><<<sms, 512, 0, main>>>(mine, from, pieceVectors, peers, rank, ranks, pieceVectors);
      } else {
        SumAndGather<4><<<sms, 512, 0, main>>>(mine, from, pieceVectors, peers, rank, ranks, pieceVectors);
      }
      CK(cudaGetLastError());
    }
    barrier();
  };

  struct Way {
    int pieces, unroll;
    bool copies, sums;
    const char* name;
  };
  const Way ways[] = {{1, 2, true, true, "1 piece, 2 vectors a thread"},
                      {1, 4, true, true, "1 piece, 4 vectors a thread"},
                      {1, 4, true, false, "  its copies + barriers alone"},
                      {1, 4, false, true, "  its sums and gather + barriers alone"},
                      {2, 4, true, true, "2 pieces"},
                      {4, 4, true, true, "4 pieces"},
                      {8, 4, true, true, "8 pieces"}};
  if (rank == 0) std::printf("# %d ranks; the slowest rank, median of 5 timings of %d calls\n", ranks, calls);
  for (size_t shard : sizes) {
    const size_t count = shard / sizeof(float) * ranks;
    Fill<<<sms, 512, 0, main>>>(input, count, rank);
    for (const Way& way : ways) {
      const auto call = [&] { allReduce(shard, way.pieces, way.unroll, way.copies, way.sums); };
      call();  // warm-up
      std::vector<double> times;
      for (int r = 0; r < 5; ++r) {
        CK(cudaStreamSynchronize(main));
        MPI_Barrier(MPI_COMM_WORLD);
        CK(cudaEventRecord(start, main));
        for (int c = 0; c < calls; ++c) call();
        CK(cudaEventRecord(stop, main));
        CK(cudaEventSynchronize(stop));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, start, stop));
        double us = ms * 1e3 / calls, slowest = 0;
        MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times.push_back(slowest);
      }
      std::sort(times.begin(), times.end());
      std::string verdict = "";
      if (way.copies && way.sums) {  // the check: a poisoned output and inbox, one whole call
        CK(cudaStreamSynchronize(main));
        MPI_Barrier(MPI_COMM_WORLD);
        CK(cudaMemset(output, 0xff, count * 4));
        CK(cudaMemset(inbox, 0xff, shard * (ranks - 1)));
        CK(cudaDeviceSynchronize());
        MPI_Barrier(MPI_COMM_WORLD);
        call();
        CK(cudaStreamSynchronize(main));
        unsigned long long* wrong = nullptr;
        CK(cudaMallocManaged(&wrong, sizeof *wrong));
        *wrong = 0;
        CountWrong<<<sms, 512, 0, main>>>(output, count, ranks, wrong);
        CK(cudaStreamSynchronize(main));
        unsigned long long total = 0, w = *wrong;
        MPI_Allreduce(&w, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        CK(cudaFree(wrong));
        verdict = ", wrong elements " + std::to_string(total);
      }
      if (rank == 0)
        std::printf("%-40s shard %5zu MiB: %9.1f us (%9.1f-%9.1f); allreduce busbw %6.1f GB/s%s\n", way.name,
                    shard >> 20, times[2], times[0], times[4],
                    2.0 * (ranks - 1) / ranks * double(count) * 4 / times[2] / 1e3, verdict.c_str());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int p = 0; p < ranks; ++p) {
    if (p == rank) continue;
    CK(cudaIpcCloseMemHandle(outputs[p]));
    CK(cudaIpcCloseMemHandle(inboxes[p]));
    CK(cudaIpcCloseMemHandle(flagArrays[p]));
  }
  MPI_Finalize();
  return 0;
}

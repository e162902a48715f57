// NCCL, loaded at run time (libnccl.so.2), for the baseline rows: its absence, at build or run time, only removes
// them. Host-only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>

#include "common/element_type.h"

namespace gradagg {

class NcclLibrary {
 public:
  // Loads libnccl.so.2 and joins a communicator of `ranks` (the unique id comes from rank 0 through `broadcast`).
  // Returns nullptr, with the reason in `why`, where NCCL is missing.
  template <typename Broadcast>
  static std::unique_ptr<NcclLibrary> Open(int rank, int ranks, Broadcast broadcast, std::string& why);
  ~NcclLibrary();

  void AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);
  std::string version() const { return version_; }

  // Collective: two buffers of `bytes` from ncclMemAlloc, each registered as a symmetric window
  // (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), so that an allreduce between them may take NCCL's
  // symmetric-memory kernels (NCCL 2.27 and later). False, with the reason in `why`, where this NCCL has no such
  // calls (the same on every rank: they share the library); a failing call throws.
  bool AllocateSymmetric(size_t bytes, std::string& why);
  void* symmetricInput() const { return symmetric_[0]; }
  void* symmetricOutput() const { return symmetric_[1]; }

 private:
  struct Api;
  NcclLibrary();
  bool Load(std::string& why);
  bool UniqueId(char* id, size_t bytes, std::string& why);
  bool Join(int rank, int ranks, const char* id, std::string& why);

  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  void* comm_ = nullptr;
  std::string version_;
  void* symmetric_[2] = {nullptr, nullptr};
  void* windows_[2] = {nullptr, nullptr};
};

// 128 bytes: NCCL_UNIQUE_ID_BYTES.
constexpr size_t kNcclUniqueIdBytes = 128;

template <typename Broadcast>
std::unique_ptr<NcclLibrary> NcclLibrary::Open(int rank, int ranks, Broadcast broadcast, std::string& why) {
  std::unique_ptr<NcclLibrary> nccl(new NcclLibrary);
  char id[kNcclUniqueIdBytes] = {};
  const bool loaded = nccl->Load(why);
  char ok = loaded && (rank != 0 || nccl->UniqueId(id, sizeof(id), why)) ? 1 : 0;
  broadcast(&ok, 1);  // rank 0's verdict decides for all, so nobody waits on a communicator that never forms
  if (!ok || !loaded) {
    if (why.empty()) why = "NCCL failed on rank 0";
    return nullptr;
  }
  broadcast(id, sizeof(id));
  if (!nccl->Join(rank, ranks, id, why)) return nullptr;
  return nccl;
}

}  // namespace gradagg

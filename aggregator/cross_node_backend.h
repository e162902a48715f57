// What phase 2 (cross_node_phase.h) needs from the memory its stripe lives in. The algorithm is written once over
// this seam; host_cross_node_backend.h serves host memory (the CPU quantizer, MPI on host buffers) and
// cuda/device_cross_node_backend.h device memory (the CUDA quantizer on a stream, MPI CUDA-aware or staged). Both
// produce the same bytes, so the phase's result does not depend on where it ran.
//
// Pointers passed in are the backend's kind of memory. Calls may be queued (on a CUDA stream) until FinishCall; the
// exchange's beforeSend and onReady callbacks may queue more.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "mpi/ordered_exchange.h"
#include "quantize/bucket_layout.h"
#include "quantize/sum_term.h"

namespace gradagg {

// Frees memory of a backend's kind; an empty one (the default) frees nothing.
struct BackendFree {
  void (*free)(void*) = nullptr;
  void operator()(void* memory) const noexcept {
    if (free != nullptr) free(memory);
  }
};
// Zeroed memory of the backend's kind, freed with its holder.
using BackendMemory = std::unique_ptr<void, BackendFree>;

// The codec's two kinds of work, timed apart.
enum class CodecStep { kEncode, kDecode };

class CrossNodeBackend {
 public:
  virtual ~CrossNodeBackend() = default;

  virtual BackendMemory Allocate(size_t bytes) = 0;
  // Memory for the exchange's messages (wire images), zeroed; after SetLayouts, which may choose its kind by size.
  virtual BackendMemory AllocateMessages(size_t bytes) = 0;
  virtual void Zero(void* memory, size_t bytes) = 0;  // done on return
  // Between the backend's memory and host memory, after the work queued so far; done on return.
  virtual void Download(void* host, const void* memory, size_t bytes) = 0;
  virtual void Upload(void* memory, const void* host, size_t bytes) = 0;
  virtual size_t SlotAlignment() const = 0;   // receive slots start on multiples of this many bytes
  virtual const char* transport() const = 0;  // how the exchange moves bytes, for the trace

  // The layouts that the codec calls below name by index: the phase's parts (exchange_plan.h), then at index
  // parts.size() our own sub-stripe whole (its parts end to end: one call for all of them). The parts are the
  // messages, which AllocateMessages may size its choice of memory by.
  virtual void SetLayouts(const std::vector<BucketLayout>& parts, const BucketLayout& own) = 0;
  // The quantizer's Encode, Decode and DecodeAccumulate (quantize/quantizer.h) on layouts[layout]. Decode counts
  // the non-finite buckets it meets when `count` is set; FinishCall returns the count.
  virtual void Encode(const float* values, float* residual, size_t layout, void* wire) = 0;
  virtual void Decode(const void* wire, size_t layout, float* out, bool count) = 0;
  virtual void DecodeAccumulate(const void* wire, size_t layout, float* sum) = 0;
  // Decode into every array of `out` (counting as Decode does). Quantized bit widths only.
  virtual void DecodeCopies(const void* wire, size_t layout, const ValueCopies& out, bool count) = 0;
  // Encode of first + Decode(addend), the sum never stored: the bytes and residual of DecodeAccumulate(addend,
  // layout, a copy of the first term (Decode of it, for a wire image)) followed by Encode of that copy.
  virtual void EncodeSum(SumTerm first, const void* addend, float* residual, size_t layout, void* wire) = 0;
  // Encode of the sum of the arrays of `values` in their order (each addition one rounding), never stored: the bytes
  // and residual of Encode of that sum. Quantized bit widths only.
  virtual void EncodeTerms(const ValueTerms& values, float* residual, size_t layout, void* wire) = 0;
  // Element-wise float32, one rounding each: to = from; sum += values; values += residual, residual = 0.
  virtual void Copy(float* to, const float* from, size_t count) = 0;
  virtual void Add(float* sum, const float* values, size_t count) = 0;
  virtual void Fold(float* values, float* residual, size_t count) = 0;

  // ExchangeInRankOrder (mpi/ordered_exchange.h, entries per piece and rank) on the backend's memory, within its
  // deadline. beforeSend(e), where set, produces sends[e] (it may queue work); e's bytes leave once it is done, while
  // later entries are produced.
  // afterSends(), where set, comes once every send is produced, before the first onReady: work to overlap the traffic.
  // On return every onReady has run; its queued work may still be running.
  virtual void Exchange(MPI_Comm cross, int tag, const std::vector<SendBuffer>& sends,
                        const std::vector<ReceiveBuffer>& receives, const std::function<void(int)>& beforeSend,
                        const std::function<void()>& afterSends, const std::function<void(int)>& onReady,
                        const char* what) = 0;

  // One call: StartCall first (timing on or off); Time around each encode and decode; FinishCall waits for all
  // queued work and returns the non-finite buckets counted; Seconds after it: the time spent in each step (0 with
  // timing off).
  virtual void StartCall(bool timing) = 0;
  virtual void Time(CodecStep step, const std::function<void()>& work) = 0;
  virtual size_t FinishCall() = 0;
  virtual double Seconds(CodecStep step) const = 0;
};

}  // namespace gradagg

// The GPUs of one fully connected group (one rank per GPU, all with peer access to each other, as behind an
// NVSwitch): their shared peer memory and the collectives that run in it. Everything is stream-ordered and needs
// no host barrier: ranks meet through flags in peer memory. Host-only header; no MPI (the caller hands in the
// all-gather that setup needs).
//
// Paths, chosen per call from the size alone, so every rank takes the same one:
// - one-shot allreduce (bytes <= oneShotMaxBytes): pushed through fixed inboxes in flagged packets (in lines above
//   oneShotLinesAbove), no barrier, any buffer;
// - packet two-shot allreduce (bytes <= packetMaxBytes): a reduce-scatter and an all-gather, both in packets through
//   the same inboxes, one kernel, no barrier, any buffer;
// - line two-shot allreduce (bytes <= lineMaxBytes): the same in 128-byte lines, 30 data words in 32;
// - two-shot allreduce and reduce-scatter on registered buffers: all-push (each rank writes its peers' parts into
//   their inboxes, owners sum locally and write the results), or pulled from the peers' inputs, as
//   PeerGroupConfig::reduction chooses by group and size, and wherever a shard is not 16-byte aligned on every rank;
// - all-gather on registered buffers: each rank writes its stripe into every rank's output;
// - two-shot allreduce of unregistered buffers: chunks staged through a registered area (two extra local copies).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda/device_memory.h"
#include "common/element_range.h"
#include "common/element_type.h"
#include "common/value_arrays.h"
#include "intra_node/cuda/control_block.h"
#include "intra_node/cuda/ipc_memory.h"
#include "intra_node/cuda/peer_order.h"
#include "intra_node/cuda/tuning.h"

namespace gradagg::nvlink {

namespace device {
struct PacketArgs;
}

// Every rank's blob (all of one size), in local-rank order.
using GroupAllGather = std::function<std::vector<char>(const std::vector<char>& mine)>;

// A barrier failed: a peer never arrived in time, or called with another size or operation.
class PeerGroupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// 128-byte lines (30 data words) in each of `ranks` shards of a line two-shot of `bytes`.
size_t LineShardLines(size_t bytes, int ranks);
// The 16-byte pairs a line two-shot of `bytes` takes in each sender's inbox slot: the signature's 128 bytes, then
// the sender's lines of the owner's shard and of its own shard's results.
size_t LineTwoShotSlotPairs(size_t bytes, int ranks);
// Data pairs (8 bytes) in each of `ranks` shards of a packet two-shot of `bytes`.
size_t PacketShardPairs(size_t bytes, int ranks);

// How two-shot reductions move data: kAllPush writes each peer's part into its inbox (writes only over NVLink),
// kPull has each owner read its shard from every peer. kByGroupSize: all-push from the tuning table's size
// (tuning.h), pull below.
enum class Reduction { kByGroupSize, kAllPush, kPull };

struct PeerGroupConfig {
  size_t oneShotMaxBytes = kAutomatic;    // allreduce at or below this: one-shot (kAutomatic: by group size)
  size_t oneShotLinesAbove = kAutomatic;  // one-shots of more bytes go in 128-byte lines (line_packets.cuh), the
                                          // rest in packets (kAutomatic: by group size; kNever: never)
  size_t packetMaxBytes = kAutomatic;     // above the one-shot, at or below this: packet two-shot (0: never)
  size_t lineMaxBytes = kAutomatic;       // above both, at or below this: line two-shot (0: never)
  size_t stagingBytes = 64 << 20;         // per rank, for two-shot allreduce of unregistered buffers
  double timeoutSeconds = 60.0;           // a barrier waiting longer reports the peer that never came
  int blocks = 0;           // two-shot blocks; 0: all-push one per multiprocessor, pulled by the tuning table
  int threads = 512;        // per block, 32 .. 512
  bool interleaved = true;  // two-shot blocks take interleaved chunks (false: one slice each)
  Reduction reduction = Reduction::kByGroupSize;
  size_t pushChunkBytes = kAutomatic;  // all-push inbox slot per block and peer, 16 KiB .. 1 MiB (by group size): the
                                       // largest chunk of a call of several rounds; a call of one may take two
  PeerOrder peerOrder = PeerOrder::kByGroupSize;  // two-shot blocks write to their peers in this order
  size_t dependentLaunchMaxBytes = kAutomatic;    // calls of at most this many bytes launch while the stream's kernel
                                                  // before them ends (dependent_launch.cuh; 0: none; by group size)
};

class PeerGroup {
 public:
  // Collective over the group: `names[p]` says who local rank p is in messages ("rank 5 on node-a"). Uses the
  // current device.
  PeerGroup(int rank, std::vector<std::string> names, GroupAllGather allGather, PeerGroupConfig config);
  // Frees this rank's peer memory. Destroy a group only once every peer has unmapped it (UnmapPeers, then a
  // barrier: GpuNode does this): CUDA IPC breaks later exports of memory freed while another process maps it.
  ~PeerGroup();
  PeerGroup(const PeerGroup&) = delete;
  PeerGroup& operator=(const PeerGroup&) = delete;

  int rank() const { return rank_; }
  int ranks() const { return static_cast<int>(names_.size()); }
  const PeerGroupConfig& config() const { return config_; }

  // Collective: every rank registers (or deregisters) its own buffer, all in the same order. Calls on a registered
  // buffer must use the same offset into it on every rank (checked at the first barrier). Deregister before freeing:
  // it returns once no peer maps the buffer any more, and freeing memory that a peer still maps is undefined in CUDA
  // IPC. A registration whose allocation is gone anyway is never used (calls stage instead).
  void Register(void* buffer, size_t bytes);
  void Deregister(void* buffer);
  // Whether [buffer, buffer + bytes) lies in a registration whose allocation is still the one registered.
  bool IsRegistered(const void* buffer, size_t bytes) const;
  // Where it lies: the registration's index in registration order (the same on every rank, as registering is
  // collective) and the offset into it; false when it is not registered. Ranks whose answers agree may call on it.
  bool FindRegistration(const void* buffer, size_t bytes, size_t& index, size_t& offset) const;

  // output[i] = input_0[i] + input_1[i] + ... + input_{G-1}[i] in float32, in local-rank order; in place allowed.
  void AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);
  // `shards` (one per local rank, the same on every rank) cut the input; this rank's stripe receives the sum, as
  // above, of its shard. Both buffers registered. With a `carry` (float32 only; this rank's own memory, shard-sized,
  // may be the stripe itself; every rank passes one or none), the stripe is carry + input_0 + ... + input_{G-1} in
  // that order: the running sum of ranks before this group goes on through it (always pulled, never all-push).
  void ReduceScatter(const void* input, const std::vector<ElementRange>& shards, void* stripe, ElementType type,
                     cudaStream_t stream, const float* carry = nullptr);
  // Reduce-scatter and all-gather of float32 `gradient` (registered) left to later kernels on `stream`: once this
  // call's wait for every peer has run there, `terms` (every local rank's elements in this rank's shard, mapped here,
  // in local-rank order) hold the sum's inputs, and `copies` (the same places, writable) take this rank's result on
  // every rank. The terms stay unchanged until they are overwritten with the copies: no peer writes into this rank's
  // shard, and each writes its own shard only after its reads of it. FinishGather, after the last copy is written,
  // waits until every peer has written its copies here.
  void LeaveToReader(const void* gradient, const std::vector<ElementRange>& shards, cudaStream_t stream,
                     ValueTerms& terms, ValueCopies& copies);
  void FinishGather(cudaStream_t stream);
  // Every rank's stripe lands at its shard of `output` on every rank. Both buffers registered.
  void AllGather(const void* stripe, const std::vector<ElementRange>& shards, void* output, ElementType type,
                 cudaStream_t stream);

  // Closes this rank's mappings of its peers' memory (waits for its own work first); no call may follow.
  void UnmapPeers();

  // Throws PeerGroupError naming the peer if a barrier of an earlier call failed (a peer never arrived, or called with
  // another size or operation). Reads host memory only: synchronise the stream first to cover the last call.
  void ThrowIfFailed() const;
  // When (the GPU's global timer, ns) a barrier of an earlier call failed; 0: none has. Reads host memory only.
  uint64_t FailedAtNs() const;

 private:
  struct Registration {
    char* local = nullptr;
    size_t bytes = 0;
    uint64_t bufferId = 0;
    std::vector<char*> peer;  // every rank's buffer, mapped here
    std::vector<ExportedBuffer> exported;
  };
  struct Located {
    const Registration* registration;
    size_t offset;
  };
  enum class Lookup { kFound, kNotRegistered, kStale };
  // Which registration holds [buffer, buffer + bytes), asking CUDA once whether its allocation is still the same.
  Lookup Find(const void* buffer, size_t bytes, Located& located) const;
  void CheckPeerBounds(const Located& located, size_t bytes, const char* what) const;  // throws UsageError
  Located Locate(const void* buffer, size_t bytes, const char* what) const;            // throws UsageError
  // Collective: exports `buffer` and maps every peer's one here.
  Registration Share(void* buffer, size_t bytes);
  void Unmap(const Registration& registration);
  std::vector<char> AllGatherRecord(const void* record, size_t bytes) const;
  void StartCall(uint64_t signature);  // throws if an earlier call failed; numbers this call
  device::BarrierContext Barrier() const;
  struct TwoShotCall {
    Located input;
    Located output;
    ElementRange shard;   // this rank's
    size_t largestShard;  // over all ranks: sets the block count, which must agree everywhere
    size_t inputShift;
    size_t outputShift;
    bool reduce;
    bool pushToAll;
    const float* carry = nullptr;  // reduce-scatter only: see ReduceScatter
  };
  // A reducing two-shot call: all-push where it can, else pulled.
  void Reduce(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type, cudaStream_t stream);
  void LaunchTwoShot(const TwoShotCall& call, ElementType type, cudaStream_t stream);
  // Whether a reducing call can run all-push: every rank's input and output 16-byte aligned at every shard, judged
  // from the registrations' records so that every rank decides alike.
  bool CanPush(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type) const;
  void LaunchAllPush(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type,
                     cudaStream_t stream);
  void FusedAllReduce(const Located& input, const Located& output, size_t count, uint64_t signature, ElementType type,
                      cudaStream_t stream);
  void OneShot(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);
  // What both packet paths pass their kernel for this call (after StartCall), and their blocks for `pairs` per rank.
  void FillPacketArgs(device::PacketArgs& args, const void* input, void* output, size_t count) const;
  // 16-byte pairs in each sender's slot of an inbox half: what a packet or line call may fill.
  size_t SlotPairs() const { return inboxHalfBytes_ / ranks() / sizeof(uint4); }
  int PacketBlocks(size_t pairs) const;
  int LineBlocks(size_t lines) const;  // for device::kLineThreads a block, a warp per 4 lines
  bool Dependent(size_t bytes) const { return bytes <= config_.dependentLaunchMaxBytes; }
  // The bytes a two-shot call reduces, as its largest shard on every rank (the sizes that pick its path).
  size_t CallBytes(const TwoShotCall& call, size_t elementBytes) const {
    return call.largestShard * ranks() * elementBytes;
  }
  // Whether this GPU and the node kernels' code (PTX for sm_90 or later) wait for the kernel before them when launched
  // dependent (dependent_launch.cuh); all of them are built alike, so one stands for all.
  bool KernelsWaitForPriorGrids() const;
  void PacketTwoShot(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);
  void LineTwoShot(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);
  void Staged(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);

  int rank_;
  std::vector<std::string> names_;
  GroupAllGather allGather_;
  PeerGroupConfig config_;
  int device_ = 0;
  int multiprocessors_ = 1;

  // This rank's peer memory: [ControlBlock][inbox half 0][inbox half 1][push inbox][staging], one cudaMalloc, shared
  // like a registered buffer (scratch_.peer: every rank's, mapped here).
  std::unique_ptr<void, CudaFree> scratchMemory_;
  PeerMappings mappings_;
  Registration scratch_;
  size_t inboxHalfBytes_ = 0;
  size_t pushInboxOffset_ = 0;
  int pushBlocks_ = 0;  // all-push blocks at most, which the push inbox is laid out for
  size_t pushChunkVectors_ = 0;
  size_t pushMinBytes_ = 0;  // all-push reductions of at least this many bytes (the rest pull)
  int twoShotBlocks_ = 1;    // blocks of a pulled two-shot unless the config sets them
  std::vector<Registration> registrations_;
  Registration staging_;  // the staging area of every rank

  std::unique_ptr<BarrierStatus, CudaFreeHost> status_;  // pinned, mapped
  BarrierStatus* statusOnDevice_ = nullptr;
  uint64_t calls_ = 0;
  bool unmapped_ = false;
  uint64_t signature_ = 0;
};

}  // namespace gradagg::nvlink

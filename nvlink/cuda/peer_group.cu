#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "gradagg/errors.h"
#include "nvlink/cuda/all_push_kernel.cuh"
#include "nvlink/cuda/one_shot_kernel.cuh"
#include "nvlink/cuda/peer_group.h"
#include "nvlink/cuda/two_shot_kernel.cuh"
#include "quantize/cuda/cuda_error.h"
#include "quantize/cuda/element_convert.cuh"

namespace gradagg::nvlink {
namespace {

constexpr size_t RoundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

constexpr size_t kAlignment = 256;
constexpr size_t kControlBytes = RoundUp(sizeof(ControlBlock), kAlignment);  // where the inboxes start

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What a call looks like, for the first barrier to compare across ranks.
uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash;
}

// Sets the group's device for the duration of a call and puts the caller's back.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    GRADAGG_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) GRADAGG_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Two-shot blocks when the config leaves it open. Measured on 4 H200s (bench/results/
// h200_nvlink_twoshot_blocks_interleaved.txt): 2 GPUs run best with one block per multiprocessor, 4 GPUs with 24-33
// (132 blocks lose 10-15% at >= 32 MiB: more requests in flight than the links serve). 8 GPUs: 16, unmeasured.
int DefaultTwoShotBlocks(int ranks, int multiprocessors) {
  if (ranks <= 2) return std::min(kMaxBlocks, multiprocessors);
  return std::min(multiprocessors, ranks <= 4 ? 32 : 16);
}

// Calls use(std::integral_constant<int, G>{}) with the group size as a kernel's compile-time rank count: 2, 4 or 8,
// else 0 (the kernels then read the rank count at run time).
template <typename Use>
void WithRankCount(int ranks, Use use) {
  switch (ranks) {
    case 2:
      use(std::integral_constant<int, 2>{});
      return;
    case 4:
      use(std::integral_constant<int, 4>{});
      return;
    case 8:
      use(std::integral_constant<int, 8>{});
      return;
    default:
      use(std::integral_constant<int, 0>{});
      return;
  }
}

template <typename T, bool kReduce, bool kPushToAll>
void LaunchTwoShotKernel(int ranks, int blocks, int threads, const device::TwoShotArgs& args, cudaStream_t stream) {
  WithRankCount(ranks, [&](auto count) {
    device::TwoShotKernel<T, decltype(count)::value, kReduce, kPushToAll><<<blocks, threads, 0, stream>>>(args);
  });
  GRADAGG_CUDA_CHECK_LAUNCH("TwoShotKernel");
}

template <typename T, bool kPushToAll>
void LaunchAllPushKernel(int ranks, int blocks, int threads, const device::AllPushArgs& args, cudaStream_t stream) {
  WithRankCount(ranks, [&](auto count) {
    device::AllPushKernel<T, decltype(count)::value, kPushToAll><<<blocks, threads, 0, stream>>>(args);
  });
  GRADAGG_CUDA_CHECK_LAUNCH("AllPushKernel");
}

}  // namespace

size_t DefaultPushChunkBytes(int ranks) {
  // Measured on 2 H200s (bench/NOTES.md): 128 KiB beat 64 KiB by 7% and 256 KiB gained 1%. With more peers a round
  // carries a chunk for each, so smaller chunks keep a round's bytes (and the inbox, one slot per peer) about the same.
  return ranks <= 2 ? (128 << 10) : ranks <= 4 ? (64 << 10) : (32 << 10);
}

size_t DefaultOneShotMaxBytes(int ranks) {
  // Measured on H200s (bench/NOTES.md): one-shot pushes (G-1) copies of the message, two-shot about two, so the
  // crossover falls as G grows.
  return ranks <= 2 ? (1 << 20) : ranks <= 4 ? (256 << 10) : (128 << 10);
}

PeerGroup::PeerGroup(int rank, std::vector<std::string> names, GroupAllGather allGather, PeerGroupConfig config)
    : rank_(rank), names_(std::move(names)), allGather_(std::move(allGather)), config_(config) {
  if (ranks() < 1 || ranks() > kMaxLocalRanks)
    throw UsageError("a peer group holds 1 to " + std::to_string(kMaxLocalRanks) + " GPUs, not " +
                     std::to_string(ranks()));
  if (config_.threads < 32 || config_.threads > 512 || config_.threads % 32 != 0)
    throw UsageError("peer group threads must be a multiple of 32 in 32 .. 512, not " +
                     std::to_string(config_.threads));
  if (config_.blocks < 0 || config_.blocks > kMaxBlocks)
    throw UsageError("peer group blocks must be 0 (automatic) .. " + std::to_string(kMaxBlocks));
  if (!(config_.timeoutSeconds > 0)) throw UsageError("the peer group timeout must be positive");
  if (config_.reduction == Reduction::kByGroupSize) {
    config_.reduction = ranks() == 2 ? Reduction::kAllPush : Reduction::kPull;
    pushMinBytes_ = 8 << 20;
  }
  if (ranks() < 2) config_.reduction = Reduction::kPull;  // nobody to push to
  if (config_.pushChunkBytes == kAutomatic) config_.pushChunkBytes = DefaultPushChunkBytes(ranks());
  if (config_.pushChunkBytes < (16 << 10) || config_.pushChunkBytes > (1 << 20))
    throw UsageError("the all-push chunk must be 16 KiB .. 1 MiB, not " + std::to_string(config_.pushChunkBytes) +
                     " bytes");
  GRADAGG_CUDA_CHECK(cudaGetDevice(&device_));
  GRADAGG_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device_));

  // 1. This rank's peer memory, control block zeroed before any peer can see it.
  // An inbox slot holds one 8-byte packet per 4 bytes of data, plus the signature packet.
  if (config_.oneShotMaxBytes == kAutomatic) config_.oneShotMaxBytes = DefaultOneShotMaxBytes(ranks());
  inboxHalfBytes_ = RoundUp(2 * std::max<size_t>(config_.oneShotMaxBytes, 16) + 32, kAlignment) * ranks();
  // The push inbox: [round parity][block][sender] chunks.
  // All-push blocks: one per multiprocessor unless set. On 2 H200s a block pushed about 10 GB/s whatever it did, so
  // the links fill only with most of the GPU's blocks (16: 0.59x NCCL at 256 MiB, 66: 1.10x, 132: 1.20x).
  pushBlocks_ = config_.blocks > 0 ? config_.blocks : std::min(kMaxBlocks, multiprocessors_);
  pushChunkVectors_ = RoundUp(config_.pushChunkBytes / 16, config_.threads);
  pushInboxOffset_ = kControlBytes + 2 * inboxHalfBytes_;
  const size_t pushInboxBytes = config_.reduction == Reduction::kAllPush
                                    ? 2 * static_cast<size_t>(pushBlocks_) * (ranks() - 1) * pushChunkVectors_ * 16
                                    : 0;
  const size_t stagingOffset = pushInboxOffset_ + pushInboxBytes;
  config_.stagingBytes = RoundUp(std::max<size_t>(config_.stagingBytes, 1 << 20), kAlignment);
  const size_t scratchBytes = stagingOffset + config_.stagingBytes;
  void* memory = nullptr;
  GRADAGG_CUDA_CHECK(cudaMalloc(&memory, scratchBytes));
  scratchMemory_.reset(memory);
  GRADAGG_CUDA_CHECK(cudaMemset(memory, 0, pushInboxOffset_));  // flags and packets start at call 0
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
  GRADAGG_CUDA_CHECK(cudaHostAlloc(&memory, sizeof(BarrierStatus), cudaHostAllocMapped));
  status_.reset(static_cast<BarrierStatus*>(memory));
  std::memset(status_.get(), 0, sizeof(BarrierStatus));
  GRADAGG_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&statusOnDevice_), status_.get(), 0));

  // 2. Everyone's peer memory, mapped here; the staging area is a window of it.
  scratch_ = Share(scratchMemory_.get(), scratchBytes);
  staging_.local = scratch_.local + stagingOffset;
  staging_.bytes = config_.stagingBytes;
  for (char* peer : scratch_.peer) staging_.peer.push_back(peer + stagingOffset);
  staging_.exported = scratch_.exported;  // for bounds and alignment; staging_ is never unmapped by itself
  for (ExportedBuffer& exported : staging_.exported) {
    exported.offset += stagingOffset;
    exported.bytes = config_.stagingBytes;
  }
}

void PeerGroup::UnmapPeers() {
  if (unmapped_) return;
  unmapped_ = true;
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());  // our own kernels may still touch peer memory
  for (const Registration& registration : registrations_) Unmap(registration);
  Unmap(scratch_);
  registrations_.clear();
}

PeerGroup::~PeerGroup() {
  try {
    UnmapPeers();
  } catch (...) {  // a destructor never throws; the process is going away or the GPU already failed
  }
  // The members free this rank's memory now.
}

std::vector<char> PeerGroup::AllGatherRecord(const void* record, size_t bytes) const {
  std::vector<char> mine(bytes);
  std::memcpy(mine.data(), record, bytes);
  std::vector<char> all = allGather_(mine);
  if (all.size() != bytes * ranks())
    throw UsageError("peer group all-gather returned " + std::to_string(all.size()) + " bytes, not " +
                     std::to_string(bytes * ranks()));
  return all;
}

PeerGroup::Registration PeerGroup::Share(void* buffer, size_t bytes) {
  Registration registration;
  registration.local = static_cast<char*>(buffer);
  registration.bytes = bytes;
  const ExportedBuffer mine = ExportBuffer(buffer, bytes);
  registration.bufferId = mine.bufferId;
  const std::vector<char> all = AllGatherRecord(&mine, sizeof(mine));
  registration.exported.resize(ranks());
  registration.peer.resize(ranks());
  for (int p = 0; p < ranks(); ++p) {
    std::memcpy(&registration.exported[p], all.data() + p * sizeof(ExportedBuffer), sizeof(ExportedBuffer));
    registration.peer[p] =
        p == rank_ ? registration.local : static_cast<char*>(mappings_.Acquire(p, registration.exported[p]));
  }
  return registration;
}

void PeerGroup::Unmap(const Registration& registration) {
  for (int p = 0; p < static_cast<int>(registration.exported.size()); ++p)
    if (p != rank_) mappings_.Release(p, registration.exported[p]);
}

void PeerGroup::Register(void* buffer, size_t bytes) {
  DeviceGuard guard(device_);
  registrations_.push_back(Share(buffer, bytes));
}

void PeerGroup::Deregister(void* buffer) {
  DeviceGuard guard(device_);
  // Collective, so no rank unmaps while a peer may still be in a call on it, and no rank returns (to free its
  // buffer) while a peer still maps it: freeing exported memory before every importer has closed it is undefined in
  // CUDA IPC (cuIpcOpenMemHandle's documentation).
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
  const char flag = 0;
  AllGatherRecord(&flag, 1);
  const auto found = std::find_if(registrations_.begin(), registrations_.end(),
                                  [buffer](const Registration& r) { return r.local == buffer; });
  if (found == registrations_.end()) throw UsageError("Deregister of a buffer that was never registered");
  Unmap(*found);
  registrations_.erase(found);
  AllGatherRecord(&flag, 1);
}

PeerGroup::Lookup PeerGroup::Find(const void* buffer, size_t bytes, Located& located) const {
  // Registrations may be adjacent, so an empty range at one's start is also at the previous one's end: the
  // allocation's identity decides, asked of CUDA once.
  const char* begin = static_cast<const char*>(buffer);
  bool overlapsStale = false;
  uint64_t bufferId = 0;
  bool identified = false;
  for (const Registration& r : registrations_) {
    if (begin < r.local || begin + bytes > r.local + r.bytes) continue;
    if (!identified) {
      bufferId = IdentifyAllocation(buffer).bufferId;
      identified = true;
    }
    if (bufferId != r.bufferId) {
      overlapsStale = true;
      continue;
    }
    located = {&r, static_cast<size_t>(begin - r.local)};
    return Lookup::kFound;
  }
  return overlapsStale ? Lookup::kStale : Lookup::kNotRegistered;
}

bool PeerGroup::IsRegistered(const void* buffer, size_t bytes) const {
  Located unused{};
  return Find(buffer, bytes, unused) == Lookup::kFound;
}

bool PeerGroup::FindRegistration(const void* buffer, size_t bytes, size_t& index, size_t& offset) const {
  Located located{};
  if (buffer == nullptr || Find(buffer, bytes, located) != Lookup::kFound) return false;
  index = static_cast<size_t>(located.registration - registrations_.data());
  offset = located.offset;
  return true;
}

void PeerGroup::CheckPeerBounds(const Located& located, size_t bytes, const char* what) const {
  for (int p = 0; p < ranks(); ++p)
    if (located.offset + bytes > located.registration->exported[p].bytes)
      throw UsageError(std::string(what) + " reaches past local rank " + std::to_string(p) + "'s registered buffer (" +
                       names_[rank_] + ")");
}

PeerGroup::Located PeerGroup::Locate(const void* buffer, size_t bytes, const char* what) const {
  Located located{};
  switch (Find(buffer, bytes, located)) {
    case Lookup::kNotRegistered:
      throw UsageError(std::string(what) + " is not in a registered buffer (" + names_[rank_] + ")");
    case Lookup::kStale:
      throw UsageError(std::string(what) + " lies in a registered buffer that was freed and allocated again (" +
                       names_[rank_] + "): deregister it before freeing, register the new one");
    case Lookup::kFound:
      break;
  }
  CheckPeerBounds(located, bytes, what);
  return located;
}

void PeerGroup::ThrowIfFailed() const {
  const volatile BarrierStatus* status = status_.get();
  const int failure = status->failure;
  if (failure == static_cast<int>(BarrierFailure::kNone)) return;
  const int peer = status->peer;
  const std::string who = "local rank " + std::to_string(peer) + " (" + names_.at(peer) + ")";
  const char* barriers[] = {"start barrier", "end barrier", "wait for pushed data", "wait for a free inbox"};
  const int reported = status->barrier;  // a plain copy: std::clamp cannot bind the volatile field
  const int barrier = std::clamp(reported, 1, 4);
  const std::string where = " at the " + std::string(barriers[barrier - 1]) + " of call " +
                            std::to_string(status->call) + ", block " + std::to_string(status->block) + ", seen by " +
                            names_[rank_];
  if (failure == static_cast<int>(BarrierFailure::kTimeout))
    throw PeerGroupError(who + " never arrived within " + std::to_string(config_.timeoutSeconds) + " s" + where);
  throw PeerGroupError(who + " called with another size, type, offset or operation" + where);
}

void PeerGroup::StartCall(uint64_t signature) {
  ThrowIfFailed();
  ++calls_;
  signature_ = signature;
}

device::BarrierContext PeerGroup::Barrier() const {
  device::BarrierContext context{};
  for (int p = 0; p < ranks(); ++p) context.peerControl[p] = reinterpret_cast<ControlBlock*>(scratch_.peer[p]);
  context.status = statusOnDevice_;
  context.call = calls_;
  context.signature = signature_;
  context.timeoutNs = static_cast<uint64_t>(config_.timeoutSeconds * 1e9);
  context.rank = rank_;
  context.ranks = ranks();
  return context;
}

void PeerGroup::AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  DeviceGuard guard(device_);
  const size_t bytes = count * ElementBytes(type);
  Located in{}, out{};
  if (bytes <= config_.oneShotMaxBytes) {
    OneShot(input, output, count, type, stream);
  } else if (Find(input, bytes, in) == Lookup::kFound && Find(output, bytes, out) == Lookup::kFound) {
    CheckPeerBounds(in, bytes, "the allreduce input");
    CheckPeerBounds(out, bytes, "the allreduce output");
    FusedAllReduce(in, out, count, Mix(Mix(Mix(Mix(1, static_cast<uint64_t>(type)), count), in.offset), out.offset),
                   type, stream);
  } else {
    Staged(input, output, count, type, stream);
  }
}

void PeerGroup::FusedAllReduce(const Located& input, const Located& output, size_t count, uint64_t signature,
                               ElementType type, cudaStream_t stream) {
  // Equal shards in 16-byte units, the first ones full: every rank computes the same cut.
  const size_t shard = RoundUp((count + ranks() - 1) / ranks(), 16 / ElementBytes(type));
  std::vector<ElementRange> shards;
  for (int p = 0; p < ranks(); ++p) {
    const size_t begin = std::min(count, shard * p);
    shards.push_back({begin, std::min(count, begin + shard) - begin});
  }
  StartCall(signature);
  Reduce({input, output, shards[rank_], shard, 0, 0, true, true}, shards, type, stream);
}

void PeerGroup::Reduce(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type,
                       cudaStream_t stream) {
  if (CanPush(call, shards, type)) {
    LaunchAllPush(call, shards, type, stream);
  } else {
    LaunchTwoShot(call, type, stream);
  }
}

bool PeerGroup::CanPush(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type) const {
  const size_t elementBytes = ElementBytes(type);
  if (config_.reduction != Reduction::kAllPush || call.largestShard * ranks() * elementBytes < pushMinBytes_)
    return false;
  for (int p = 0; p < ranks(); ++p) {
    // Allocations start 256-byte aligned, so the offsets in every rank's records decide, the same on all ranks.
    const size_t input = call.input.registration->exported[p].offset + call.input.offset;
    const size_t output = call.output.registration->exported[p].offset + call.output.offset;
    for (const ElementRange& shard : shards) {
      if ((input + shard.begin * elementBytes) % 16 != 0) return false;
      if (call.pushToAll && (output + shard.begin * elementBytes) % 16 != 0) return false;
    }
    if (!call.pushToAll && output % 16 != 0) return false;  // rank p's stripe
  }
  return true;
}

void PeerGroup::LaunchAllPush(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type,
                              cudaStream_t stream) {
  device::AllPushArgs args{};
  args.input = call.input.registration->local + call.input.offset;
  for (int p = 0; p < ranks(); ++p) {
    args.peerOutput[p] = call.output.registration->peer[p] + call.output.offset;
    args.peerInbox[p] = reinterpret_cast<uint4*>(scratch_.peer[p] + pushInboxOffset_);
    args.shardBegin[p] = shards[p].begin;
    args.shardCount[p] = shards[p].count;
  }
  args.outputShift = call.outputShift;
  // Chunks as large as the inbox slot, or smaller where that leaves blocks idle, in whole rows of threads.
  const size_t largestVectors = (call.largestShard * ElementBytes(type) + 15) / 16;
  const size_t threads = static_cast<size_t>(config_.threads);
  args.chunkVectors =
      std::clamp(RoundUp((largestVectors + pushBlocks_ - 1) / pushBlocks_, threads), threads, pushChunkVectors_);
  args.slotVectors = pushChunkVectors_;
  args.chunks = std::max<size_t>(1, (largestVectors + args.chunkVectors - 1) / args.chunkVectors);
  args.inboxBlocks = pushBlocks_;
  args.order = config_.peerOrder;
  args.barrier = Barrier();
  const int blocks = static_cast<int>(std::min<size_t>(args.chunks, pushBlocks_));
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    if (call.pushToAll) {
      LaunchAllPushKernel<T, true>(ranks(), blocks, config_.threads, args, stream);
    } else {
      LaunchAllPushKernel<T, false>(ranks(), blocks, config_.threads, args, stream);
    }
  });
}

void PeerGroup::OneShot(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  if (count == 0) return;  // nothing moves, so no call is counted: every rank skips it alike
  StartCall(Mix(Mix(2, static_cast<uint64_t>(type)), count));
  device::OneShotArgs args{};
  args.input = input;
  args.output = output;
  args.count = count;
  const size_t half = (calls_ & 1) * inboxHalfBytes_;
  for (int p = 0; p < ranks(); ++p)
    args.peerInbox[p] = reinterpret_cast<uint4*>(scratch_.peer[p] + kControlBytes + half);
  args.slotPairs = inboxHalfBytes_ / ranks() / sizeof(uint4);
  args.barrier = Barrier();
  const size_t pairs = (count * ElementBytes(type) + 7) / 8;
  const size_t perBlock = static_cast<size_t>(config_.threads);
  const int blocks = static_cast<int>(
      std::clamp<size_t>((pairs + perBlock - 1) / perBlock, 1, std::min(kMaxBlocks, 2 * multiprocessors_)));
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    device::OneShotAllReduceKernel<T><<<blocks, config_.threads, 0, stream>>>(args);
    GRADAGG_CUDA_CHECK_LAUNCH("OneShotAllReduceKernel");
  });
}

void PeerGroup::Staged(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  const size_t elementBytes = ElementBytes(type);
  const size_t chunk = staging_.bytes / elementBytes / 256 * 256;
  for (size_t done = 0; done < count; done += chunk) {
    const size_t n = std::min(chunk, count - done);
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(staging_.local, static_cast<const char*>(input) + done * elementBytes,
                                       n * elementBytes, cudaMemcpyDeviceToDevice, stream));
    FusedAllReduce({&staging_, 0}, {&staging_, 0}, n, Mix(Mix(Mix(3, static_cast<uint64_t>(type)), count), n), type,
                   stream);
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(output) + done * elementBytes, staging_.local,
                                       n * elementBytes, cudaMemcpyDeviceToDevice, stream));
  }
}

namespace {
size_t LargestShard(const std::vector<ElementRange>& shards) {
  size_t largest = 0;
  for (const ElementRange& s : shards) largest = std::max(largest, s.count);
  return largest;
}
}  // namespace

void PeerGroup::ReduceScatter(const void* input, const std::vector<ElementRange>& shards, void* stripe,
                              ElementType type, cudaStream_t stream) {
  DeviceGuard guard(device_);
  if (static_cast<int>(shards.size()) != ranks()) throw UsageError("reduce-scatter needs one shard per local rank");
  const size_t elementBytes = ElementBytes(type);
  const ElementRange shard = shards[rank_];
  TwoShotCall call{Locate(input, shards.back().end() * elementBytes, "the reduce-scatter input"),
                   Locate(stripe, shard.count * elementBytes, "the reduce-scatter stripe"),
                   shard,
                   LargestShard(shards),
                   0,
                   shard.begin,
                   true,
                   false};
  StartCall(Mix(Mix(Mix(4, static_cast<uint64_t>(type)), shards.back().end()), call.input.offset));
  Reduce(call, shards, type, stream);
}

void PeerGroup::AllGather(const void* stripe, const std::vector<ElementRange>& shards, void* output, ElementType type,
                          cudaStream_t stream) {
  DeviceGuard guard(device_);
  if (static_cast<int>(shards.size()) != ranks()) throw UsageError("all-gather needs one shard per local rank");
  const size_t elementBytes = ElementBytes(type);
  const ElementRange shard = shards[rank_];
  TwoShotCall call{Locate(stripe, shard.count * elementBytes, "the all-gather stripe"),
                   Locate(output, shards.back().end() * elementBytes, "the all-gather output"),
                   shard,
                   LargestShard(shards),
                   shard.begin,
                   0,
                   false,
                   true};
  StartCall(Mix(Mix(Mix(5, static_cast<uint64_t>(type)), shards.back().end()), call.output.offset));
  LaunchTwoShot(call, type, stream);
}

void PeerGroup::LaunchTwoShot(const TwoShotCall& call, ElementType type, cudaStream_t stream) {
  const size_t elementBytes = ElementBytes(type);
  device::TwoShotArgs args{};
  bool vector = true;
  for (int p = 0; p < ranks(); ++p) {
    args.peerInput[p] = call.input.registration->peer[p] + call.input.offset;
    args.peerOutput[p] = call.output.registration->peer[p] + call.output.offset;
    const bool used = p == rank_ || call.reduce;
    if (used)
      vector = vector && Aligned16(static_cast<const char*>(args.peerInput[p]) +
                                   (call.shard.begin - call.inputShift) * elementBytes);
    if (p == rank_ || call.pushToAll)
      vector = vector && Aligned16(static_cast<const char*>(args.peerOutput[p]) +
                                   (call.shard.begin - call.outputShift) * elementBytes);
  }
  args.shardBegin = call.shard.begin;
  args.shardCount = call.shard.count;
  args.inputShift = call.inputShift;
  args.outputShift = call.outputShift;
  args.vector = vector;
  args.interleaved = config_.interleaved;
  args.order = config_.peerOrder;
  args.barrier = Barrier();
  const size_t perBlock = static_cast<size_t>(config_.threads) * (16 / elementBytes);
  const int most = config_.blocks > 0 ? config_.blocks : DefaultTwoShotBlocks(ranks(), multiprocessors_);
  const int blocks = static_cast<int>(std::clamp<size_t>((call.largestShard + perBlock - 1) / perBlock, 1, most));
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    if (call.reduce && call.pushToAll) {
      LaunchTwoShotKernel<T, true, true>(ranks(), blocks, config_.threads, args, stream);
    } else if (call.reduce) {
      LaunchTwoShotKernel<T, true, false>(ranks(), blocks, config_.threads, args, stream);
    } else {
      LaunchTwoShotKernel<T, false, true>(ranks(), blocks, config_.threads, args, stream);
    }
  });
}

}  // namespace gradagg::nvlink

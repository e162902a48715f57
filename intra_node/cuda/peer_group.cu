// The peer group: setup (each rank's scratch memory, shared over CUDA IPC), the table of registered buffers, the
// barrier context, and the entry points that pick an algorithm: one-shot for small messages (one_shot_launch.cu),
// the packet or line two-shot above it (packet_two_shot_launch.cu, line_two_shot_launch.cu; the packet two-shot only
// where a threshold asks for it), two-shot pulled or all-push for the rest
// (two_shot_launch.cu, all_push_launch.cu), through the staging area for unregistered buffers (staged_allreduce.cu).
#include <algorithm>
#include <cstring>
#include <utility>

#include "common/cuda/cuda_error.h"
#include "gradagg/errors.h"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

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
  const Tuning& tuning = TuningFor(ranks());
  if (config_.reduction == Reduction::kByGroupSize) {
    config_.reduction = Reduction::kAllPush;
    pushMinBytes_ = tuning.pushMinBytes;
  }
  if (config_.peerOrder == PeerOrder::kByGroupSize) config_.peerOrder = tuning.peerOrder;
  if (ranks() < 2) config_.reduction = Reduction::kPull;  // nobody to push to
  if (config_.pushChunkBytes == kAutomatic) config_.pushChunkBytes = tuning.pushChunkBytes;
  if (config_.pushChunkBytes < (16 << 10) || config_.pushChunkBytes > (1 << 20))
    throw UsageError("the all-push chunk must be 16 KiB .. 1 MiB, not " + std::to_string(config_.pushChunkBytes) +
                     " bytes");
  GRADAGG_CUDA_CHECK(cudaGetDevice(&device_));
  GRADAGG_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device_));
  twoShotBlocks_ = tuning.twoShotBlocks > 0 ? std::min(multiprocessors_, tuning.twoShotBlocks)
                                            : std::min(kMaxBlocks, multiprocessors_);

  // 1. This rank's peer memory, control block zeroed before any peer can see it.
  // An inbox slot holds the signature packet and one 8-byte packet per 4 bytes of data: the one-shot's whole message,
  // or the packet two-shot's part of a shard and the sender's own shard's results; or the same two in lines.
  if (config_.oneShotMaxBytes == kAutomatic) config_.oneShotMaxBytes = tuning.oneShotMaxBytes;
  if (config_.packetMaxBytes == kAutomatic) config_.packetMaxBytes = tuning.packetMaxBytes;
  if (config_.lineMaxBytes == kAutomatic) config_.lineMaxBytes = tuning.lineMaxBytes;
  if (config_.oneShotLinesAbove == kAutomatic) config_.oneShotLinesAbove = tuning.oneShotLinesAbove;
  if (config_.dependentLaunchMaxBytes == kAutomatic) config_.dependentLaunchMaxBytes = tuning.dependentLaunchMaxBytes;
  if (!KernelsWaitForPriorGrids()) config_.dependentLaunchMaxBytes = 0;
  if (config_.packetMaxBytes > (16 << 20))  // its inbox: four times as many bytes, twice (call parity)
    throw UsageError("the packet two-shot reaches 16 MiB at most, not " + std::to_string(config_.packetMaxBytes) +
                     " bytes");
  if (config_.lineMaxBytes > (16 << 20))
    throw UsageError("the line two-shot reaches 16 MiB at most, not " + std::to_string(config_.lineMaxBytes) +
                     " bytes");
  const size_t linePairs = config_.lineMaxBytes > 0 ? LineTwoShotSlotPairs(config_.lineMaxBytes, ranks()) : 0;
  const size_t slotPairs = std::max({(std::max<size_t>(config_.oneShotMaxBytes, 16) + 7) / 8 + 2,
                                     1 + 2 * PacketShardPairs(config_.packetMaxBytes, ranks()), linePairs});
  inboxHalfBytes_ = RoundUp(slotPairs * 16, kAlignment) * ranks();
  // The push inbox: [round parity][block][sender] chunks.
  // All-push blocks: one per multiprocessor unless set; the links fill only with most of the GPU's blocks.
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

uint64_t PeerGroup::FailedAtNs() const {
  const volatile BarrierStatus* status = status_.get();
  if (status->failure == static_cast<int>(BarrierFailure::kNone)) return 0;
  const uint64_t seen = status->timeNs;  // a plain copy: std::max cannot bind the volatile field
  return std::max<uint64_t>(seen, 1);
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
  } else if (bytes <= config_.packetMaxBytes) {
    PacketTwoShot(input, output, count, type, stream);
  } else if (bytes <= config_.lineMaxBytes) {
    LineTwoShot(input, output, count, type, stream);
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

namespace {
size_t LargestShard(const std::vector<ElementRange>& shards) {
  size_t largest = 0;
  for (const ElementRange& s : shards) largest = std::max(largest, s.count);
  return largest;
}
}  // namespace

void PeerGroup::ReduceScatter(const void* input, const std::vector<ElementRange>& shards, void* stripe,
                              ElementType type, cudaStream_t stream, const float* carry) {
  DeviceGuard guard(device_);
  if (static_cast<int>(shards.size()) != ranks()) throw UsageError("reduce-scatter needs one shard per local rank");
  if (carry != nullptr && type != ElementType::kFloat32)
    throw UsageError(std::string("a reduce-scatter with a carry sums float32 only, not ") + ToString(type) + " (" +
                     names_[rank_] + ")");
  const size_t elementBytes = ElementBytes(type);
  const ElementRange shard = shards[rank_];
  TwoShotCall call{Locate(input, shards.back().end() * elementBytes, "the reduce-scatter input"),
                   Locate(stripe, shard.count * elementBytes, "the reduce-scatter stripe"),
                   shard,
                   LargestShard(shards),
                   0,
                   shard.begin,
                   true,
                   false,
                   carry};
  StartCall(Mix(Mix(Mix(Mix(4, static_cast<uint64_t>(type)), shards.back().end()), call.input.offset),
                carry != nullptr ? 1 : 0));
  if (carry != nullptr) {
    LaunchTwoShot(call, type, stream);
  } else {
    Reduce(call, shards, type, stream);
  }
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

}  // namespace gradagg::nvlink

#include "intra_node/group_chain.h"

#include <algorithm>
#include <utility>

#include "gradagg/errors.h"
#include "common/cuda/cuda_error.h"
#include "mpi/mpi_error.h"
#include "intra_node/cuda/float32_conversion.h"
#include "intra_node/group_all_gather.h"

namespace gradagg {
namespace {

constexpr size_t kPage = size_t{2} << 20;  // CUDA's allocation granularity

Communicator SplitOf(MPI_Comm comm, int color, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  GRADAGG_MPI_CHECK(MPI_Comm_split(comm, color, key, &part));
  return Communicator(part);
}

bool Mutual(const PeerAccessMatrix& access, size_t a, size_t b) { return access[a][b] && access[b][a]; }

void CopyOnDevice(float* to, const float* from, size_t count, cudaStream_t stream) {
  if (count > 0 && to != from)
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

bool GroupChain::Fits(const std::vector<std::vector<int>>& groups) {
  if (groups.size() < 2) return false;
  for (const auto& group : groups)
    if (group.size() != groups[0].size()) return false;
  return true;
}

GroupChain::GroupChain(MPI_Comm node, const std::vector<std::vector<int>>& groups, const PeerAccessMatrix& access,
                       const std::vector<std::string>& names, const nvlink::PeerGroupConfig& config)
    : config_(config) {
  int me = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(node, &me));
  if (!Fits(groups)) throw UsageError("a chain of NVLink groups needs two or more groups of one size");
  groupCount_ = groups.size();
  groupSize_ = groups[0].size();
  for (size_t g = 0; g < groupCount_; ++g)
    for (size_t k = 0; k < groupSize_; ++k)
      if (groups[g][k] != static_cast<int>(g * groupSize_ + k))
        throw UsageError("NVLink groups must be runs of consecutive local ranks (" + RankAndHost() + ")");
  group_ = static_cast<size_t>(me) / groupSize_;
  column_ = static_cast<size_t>(me) % groupSize_;

  // Communicators first, all collective over the node and in one order; then the peer groups over them, the group
  // before the links and the links in chain order, so no two ranks wait on each other in opposite orders.
  groupComm_ = SplitOf(node, static_cast<int>(group_), me);
  Communicator belowComm, aboveComm;
  for (size_t link = 0; link + 1 < groupCount_; ++link) {
    const bool on = group_ == link || group_ == link + 1;
    Communicator pair = SplitOf(node, on ? static_cast<int>(column_) : MPI_UNDEFINED, static_cast<int>(group_));
    if (group_ == link + 1) belowComm = std::move(pair);
    if (group_ == link) aboveComm = std::move(pair);
  }
  std::vector<std::string> groupNames(names.begin() + group_ * groupSize_, names.begin() + (group_ + 1) * groupSize_);
  peers_ = std::make_unique<nvlink::PeerGroup>(static_cast<int>(column_), groupNames,
                                               BoundedAllGather(groupComm_.get(), config_.timeoutSeconds), config_);
  const auto linkTo = [&](Communicator& pair, size_t lower, size_t upper) {
    return std::make_unique<GroupLink>(pair.get(), std::vector<std::string>{names[lower], names[upper]},
                                       Mutual(access, lower, upper), config_);
  };
  const size_t mine = static_cast<size_t>(me);
  if (group_ > 0) below_ = linkTo(belowComm, mine - groupSize_, mine);
  if (group_ + 1 < groupCount_) above_ = linkTo(aboveComm, mine, mine + groupSize_);
}

GroupChain::~GroupChain() = default;

int GroupChain::directLinks() const {
  return (below_ && below_->direct() ? 1 : 0) + (above_ && above_->direct() ? 1 : 0);
}

int GroupChain::hostLinks() const {
  return (below_ && !below_->direct() ? 1 : 0) + (above_ && !above_->direct() ? 1 : 0);
}

void GroupChain::UnmapPeers() {
  peers_->UnmapPeers();
  if (below_) below_->UnmapPeers();
  if (above_) above_->UnmapPeers();
}

void GroupChain::ThrowIfFailed() const {
  // Where several failed, one may have failed because of another (a rank late by its neighbour's timeout): the
  // earliest names the cause.
  const uint64_t group = peers_->FailedAtNs(), below = below_ ? below_->FailedAtNs() : 0,
                 above = above_ ? above_->FailedAtNs() : 0;
  const auto earliest = [](uint64_t a, uint64_t b) { return a != 0 && (b == 0 || a <= b); };
  if (earliest(below, group) && earliest(below, above)) below_->ThrowIfFailed();
  if (earliest(above, group)) above_->ThrowIfFailed();
  peers_->ThrowIfFailed();
}

void GroupChain::Abandon() noexcept {
  try {
    peers_->UnmapPeers();
  } catch (...) {  // the GPU may have failed already; nothing more to undo here
  }
  peers_.release();  // leaked on purpose: peers may still map this rank's memory
  if (below_) below_->Abandon();
  if (above_) above_->Abandon();
  groupComm_.Release();
  full_.Leak();
  partial_.Leak();
}

void GroupChain::Reserve(size_t count) {
  if (count <= capacity_) return;
  // Collective in the constructor's order: the group, then the link below, then the one above.
  const auto each = [&](auto use) {
    use(*peers_);
    if (below_) use(*below_);
    if (above_) use(*above_);
  };
  if (full_.get() != nullptr) {
    each([&](auto& peers) { peers.Deregister(full_.get()); });
    each([&](auto& peers) { peers.Deregister(partial_.get()); });
  }
  full_ = DeviceBuffer();
  partial_ = DeviceBuffer();
  // Whole 2 MiB pages, and at least twice the last size: each buffer an allocation of its own (CUDA packs smaller
  // ones into shared pages, and a page that peers mapped for a freed buffer then comes back under a new one: seen
  // as stale sums in the first call after growing, about one run in five), and growth rare.
  const auto pages = [](size_t bytes) { return std::max(kPage, (bytes + kPage - 1) / kPage * kPage); };
  capacity_ = pages(std::max(count, 2 * capacity_) * sizeof(float)) / sizeof(float);
  full_ = DeviceBuffer(capacity_ * sizeof(float));
  partial_ = DeviceBuffer(pages(Columns(capacity_)[0].count * sizeof(float)));
  each([&](auto& peers) { peers.Register(full_.get(), full_.bytes()); });
  each([&](auto& peers) { peers.Register(partial_.get(), partial_.bytes()); });
}

std::vector<ElementRange> GroupChain::Columns(size_t count) const {
  // Equal columns in 16-byte units, the first ones full: every rank cuts alike, and columns start aligned.
  const size_t width = (count + groupSize_ - 1) / groupSize_;
  const size_t aligned = (width + 3) / 4 * 4;
  std::vector<ElementRange> columns;
  for (size_t k = 0; k < groupSize_; ++k) {
    const size_t begin = std::min(count, k * aligned);
    columns.push_back({begin, std::min(count, begin + aligned) - begin});
  }
  return columns;
}

std::vector<ElementRange> GroupChain::ColumnsOf(const std::vector<ElementRange>& columns, size_t lo, size_t hi) const {
  std::vector<ElementRange> parts;
  for (const ElementRange& column : columns) {
    const size_t begin = std::clamp(column.begin, lo, hi), end = std::clamp(column.end(), lo, hi);
    parts.push_back({begin, end - begin});
  }
  return parts;
}

size_t GroupChain::ShardsEnd(const std::vector<ElementRange>& shards, size_t group) const {
  return shards[(group + 1) * groupSize_ - 1].end();
}

void GroupChain::Forward(size_t link, float* buffer, ElementRange range, bool upward, cudaStream_t stream) {
  if (group_ == link) above_->Forward(buffer, range, upward, stream);
  if (group_ == link + 1) below_->Forward(buffer, range, upward, stream);
}

void GroupChain::GatherInGroup(size_t group, const std::vector<ElementRange>& parts, cudaStream_t stream) {
  if (group_ != group || groupSize_ == 1) return;  // a group of one holds its one part already
  float* full = full_.as<float>();
  const ElementRange mine = parts[column_];  // empty: the buffer's start (its end may lie past the allocation)
  peers_->AllGather(mine.count > 0 ? full + mine.begin : full, parts, full, ElementType::kFloat32, stream);
}

void GroupChain::ReduceUp(size_t count, cudaStream_t stream) {
  const std::vector<ElementRange> columns = Columns(count);
  float* full = full_.as<float>();
  float* partial = partial_.as<float>();
  const ElementRange myColumn{0, columns[column_].count};  // in partial_
  for (size_t g = 0; g < groupCount_; ++g) {
    if (group_ == g)
      peers_->ReduceScatter(full, columns, partial, ElementType::kFloat32, stream, g > 0 ? partial : nullptr);
    if (g + 1 < groupCount_) Forward(g, partial, myColumn, true, stream);
  }
}

void GroupChain::SpreadWhole(size_t count, cudaStream_t stream) {
  const std::vector<ElementRange> columns = Columns(count);
  float* full = full_.as<float>();
  if (group_ + 1 == groupCount_) peers_->AllGather(partial_.as<float>(), columns, full, ElementType::kFloat32, stream);
  for (size_t g = groupCount_ - 1; g-- > 0;) {
    Forward(g, full, columns[column_], false, stream);
    GatherInGroup(g, columns, stream);
  }
}

void GroupChain::SpreadShards(const std::vector<ElementRange>& shards, cudaStream_t stream) {
  const std::vector<ElementRange> columns = Columns(shards.back().end());
  float* full = full_.as<float>();
  if (group_ + 1 == groupCount_)
    CopyOnDevice(full + columns[column_].begin, partial_.as<float>(), columns[column_].count, stream);
  // Link g carries down what groups 0 .. g own: its column of [0, end of group g's shards).
  for (size_t g = groupCount_ - 1; g-- > 0;)
    Forward(g, full, ColumnsOf(columns, 0, ShardsEnd(shards, g))[column_], false, stream);
  GatherInGroup(group_, ColumnsOf(columns, shards[group_ * groupSize_].begin, ShardsEnd(shards, group_)), stream);
}

void GroupChain::AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  if (count == 0) return;
  Reserve(count);
  ConvertToFloat32(input, type, count, full_.as<float>(), stream);
  ReduceUp(count, stream);
  SpreadWhole(count, stream);
  ConvertFromFloat32(full_.as<float>(), count, output, type, stream);
}

void GroupChain::ReduceScatter(const float* input, const std::vector<ElementRange>& shards, float* stripe,
                               cudaStream_t stream) {
  const size_t count = shards.empty() ? 0 : shards.back().end();
  if (count == 0) return;
  Reserve(count);
  CopyOnDevice(full_.as<float>(), input, count, stream);
  ReduceUp(count, stream);
  SpreadShards(shards, stream);
  const ElementRange mine = shards[group_ * groupSize_ + column_];
  CopyOnDevice(stripe, full_.as<float>() + mine.begin, mine.count, stream);
}

void GroupChain::AllGather(const float* stripe, const std::vector<ElementRange>& shards, float* output,
                           cudaStream_t stream) {
  const size_t count = shards.empty() ? 0 : shards.back().end();
  if (count == 0) return;
  Reserve(count);
  float* full = full_.as<float>();
  const ElementRange mine = shards[group_ * groupSize_ + column_];
  CopyOnDevice(full + mine.begin, stripe, mine.count, stream);
  // Inside every group: its members' stripes.
  const auto first = shards.begin() + group_ * groupSize_;
  GatherInGroup(group_, std::vector<ElementRange>(first, first + groupSize_), stream);
  const std::vector<ElementRange> columns = Columns(count);
  // Up the chain: group g+1 receives [0, end of group g's stripes), by columns.
  for (size_t g = 0; g + 1 < groupCount_; ++g) {
    const std::vector<ElementRange> parts = ColumnsOf(columns, 0, ShardsEnd(shards, g));
    Forward(g, full, parts[column_], true, stream);
    GatherInGroup(g + 1, parts, stream);
  }
  // Down the chain: group g receives [start of group g+1's stripes, count).
  for (size_t g = groupCount_ - 1; g-- > 0;) {
    const std::vector<ElementRange> parts = ColumnsOf(columns, shards[(g + 1) * groupSize_].begin, count);
    Forward(g, full, parts[column_], false, stream);
    GatherInGroup(g, parts, stream);
  }
  CopyOnDevice(output, full, count, stream);
}

}  // namespace gradagg

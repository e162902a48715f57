#include "intra_node/gpu_node.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>

#include "gradagg/errors.h"
#include "common/cuda/cuda_error.h"
#include "mpi/agreement.h"
#include "mpi/mpi_error.h"
#include "intra_node/cuda/peer_access.h"
#include "intra_node/group_all_gather.h"

namespace gradagg {
namespace {

double ParseNumber(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || value < 0)
    throw UsageError(std::string(name) + "=" + text + " is not a non-negative number");
  return value;
}

// Collective over `comm`: every rank's row of a yes/no relation to every rank (as PeerAccessRow returns it), as a
// matrix indexed [rank][rank].
PeerAccessMatrix AllGatherMatrix(MPI_Comm comm, const std::vector<bool>& row) {
  const int ranks = static_cast<int>(row.size());
  const std::vector<char> all = AllGatherBytes(comm, std::vector<char>(row.begin(), row.end()));
  PeerAccessMatrix matrix(ranks, std::vector<bool>(ranks));
  for (int i = 0; i < ranks; ++i)
    for (int j = 0; j < ranks; ++j) matrix[i][j] = all[i * ranks + j] != 0;
  return matrix;
}

std::string SizeSetting(size_t bytes) {
  if (bytes == nvlink::kAutomatic) return "the default";
  if (bytes == nvlink::kNever) return "never";
  return std::to_string(bytes);
}

// The settings that decide which kernels run and how their memory is laid out, by the variable that sets them: a rank
// given other values would make other calls or read its peers' data in the wrong place. (The timeout, the dependent
// launches and the trace are each rank's own; phases left to phase 2 are taken where every rank has them on.)
std::vector<NamedSetting> SettingsEveryRankShares(const GpuNodeConfig& config) {
  const nvlink::PeerGroupConfig& group = config.group;
  std::string access = config.accessOverride.empty() ? "as measured" : "";
  for (const std::vector<bool>& row : config.accessOverride) {
    if (!access.empty()) access += "/";
    for (const bool reaches : row) access += reaches ? '1' : '0';
  }
  return {{"GRADAGG_NVLINK_ONE_SHOT_MAX", SizeSetting(group.oneShotMaxBytes)},
          {"GRADAGG_NVLINK_ONE_SHOT_LINES_ABOVE", SizeSetting(group.oneShotLinesAbove)},
          {"GRADAGG_NVLINK_PACKET_MAX", SizeSetting(group.packetMaxBytes)},
          {"GRADAGG_NVLINK_LINE_MAX", SizeSetting(group.lineMaxBytes)},
          {"GRADAGG_NVLINK_STAGING", SizeSetting(group.stagingBytes)},
          {"GRADAGG_NVLINK_BLOCKS", std::to_string(group.blocks)},
          {"GRADAGG_NVLINK_THREADS", std::to_string(group.threads)},
          {"GRADAGG_NVLINK_INTERLEAVED", group.interleaved ? "1" : "0"},
          {"GRADAGG_NVLINK_ALL_PUSH", group.reduction == nvlink::Reduction::kByGroupSize
                                          ? "the default"
                                          : std::to_string(group.reduction == nvlink::Reduction::kAllPush ? 1 : 0)},
          {"GRADAGG_NVLINK_PUSH_CHUNK", SizeSetting(group.pushChunkBytes)},
          {"GRADAGG_NVLINK_PEER_ORDER", group.peerOrder == nvlink::PeerOrder::kByGroupSize
                                            ? "the default"
                                            : std::to_string(static_cast<int>(group.peerOrder))},
          {"GRADAGG_NVLINK_GROUP_SIZE", std::to_string(config.forcedGroupSize)},
          {"GRADAGG_NVLINK_TOPOLOGY", access},
          {"GRADAGG_NVLINK_HOST_BETWEEN_GROUPS", config.hostBetweenGroups ? "1" : "0"},
          {"GRADAGG_NVLINK_SHARE_GPUS", config.shareGpus ? "1" : "0"}};
}

}  // namespace

GpuNodeConfig GpuNodeConfigFromEnvironment(GpuNodeConfig config) {
  nvlink::PeerGroupConfig& group = config.group;
  if (std::getenv("GRADAGG_NVLINK_ONE_SHOT_MAX") != nullptr)
    group.oneShotMaxBytes = static_cast<size_t>(ParseNumber("GRADAGG_NVLINK_ONE_SHOT_MAX", 0));
  if (std::getenv("GRADAGG_NVLINK_PACKET_MAX") != nullptr)
    group.packetMaxBytes = static_cast<size_t>(ParseNumber("GRADAGG_NVLINK_PACKET_MAX", 0));
  if (std::getenv("GRADAGG_NVLINK_ONE_SHOT_LINES_ABOVE") != nullptr)
    group.oneShotLinesAbove = static_cast<size_t>(ParseNumber("GRADAGG_NVLINK_ONE_SHOT_LINES_ABOVE", 0));
  if (std::getenv("GRADAGG_NVLINK_LINE_MAX") != nullptr)
    group.lineMaxBytes = static_cast<size_t>(ParseNumber("GRADAGG_NVLINK_LINE_MAX", 0));
  group.stagingBytes =
      static_cast<size_t>(ParseNumber("GRADAGG_NVLINK_STAGING", static_cast<double>(group.stagingBytes)));
  group.timeoutSeconds = ParseNumber("GRADAGG_NVLINK_TIMEOUT", group.timeoutSeconds);
  group.blocks = static_cast<int>(ParseNumber("GRADAGG_NVLINK_BLOCKS", group.blocks));
  group.threads = static_cast<int>(ParseNumber("GRADAGG_NVLINK_THREADS", group.threads));
  group.interleaved = ParseNumber("GRADAGG_NVLINK_INTERLEAVED", group.interleaved ? 1 : 0) != 0;
  if (std::getenv("GRADAGG_NVLINK_ALL_PUSH") != nullptr)
    group.reduction =
        ParseNumber("GRADAGG_NVLINK_ALL_PUSH", 0) != 0 ? nvlink::Reduction::kAllPush : nvlink::Reduction::kPull;
  if (std::getenv("GRADAGG_NVLINK_PEER_ORDER") != nullptr) {
    const int order = static_cast<int>(ParseNumber("GRADAGG_NVLINK_PEER_ORDER", 0));
    if (order < 0 || order > 2) throw UsageError("GRADAGG_NVLINK_PEER_ORDER must be 0, 1 or 2");
    group.peerOrder = static_cast<nvlink::PeerOrder>(order);
  }
  if (std::getenv("GRADAGG_NVLINK_DEPENDENT_LAUNCH_MAX") != nullptr)
    group.dependentLaunchMaxBytes = static_cast<size_t>(ParseNumber("GRADAGG_NVLINK_DEPENDENT_LAUNCH_MAX", 0));
  if (std::getenv("GRADAGG_NVLINK_PUSH_CHUNK") != nullptr)
    group.pushChunkBytes = static_cast<size_t>(ParseNumber("GRADAGG_NVLINK_PUSH_CHUNK", 0));
  config.forcedGroupSize = static_cast<int>(ParseNumber("GRADAGG_NVLINK_GROUP_SIZE", config.forcedGroupSize));
  if (const char* path = std::getenv("GRADAGG_NVLINK_TOPOLOGY"); path != nullptr && *path != '\0') {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    if (!file) throw UsageError(std::string("GRADAGG_NVLINK_TOPOLOGY=") + path + " cannot be read");
    try {
      config.accessOverride = ParsePeerAccess(text.str());
    } catch (const std::invalid_argument& error) {
      throw UsageError(std::string("GRADAGG_NVLINK_TOPOLOGY=") + path + ": " + error.what());
    }
  }
  config.hostBetweenGroups = ParseNumber("GRADAGG_NVLINK_HOST_BETWEEN_GROUPS", config.hostBetweenGroups ? 1 : 0) != 0;
  config.traceLevel = static_cast<int>(ParseNumber("GRADAGG_TRACE", config.traceLevel));
  config.shareGpus = ParseNumber("GRADAGG_NVLINK_SHARE_GPUS", config.shareGpus ? 1 : 0) != 0;
  config.sumInReader = ParseNumber("GRADAGG_NVLINK_SUM_IN_READER", config.sumInReader ? 1 : 0) != 0;
  return config;
}

GpuNode::GpuNode(MPI_Comm node, const GpuNodeConfig& config) : config_(config), node_(Communicator::Duplicate(node)) {
  const int ranks = node_.size(), me = node_.rank();
  if (const std::string problem = AgreeOnSettings(node_.get(), SettingsEveryRankShares(config_)); !problem.empty())
    throw UsageError(problem + ": give every rank of a node the same GRADAGG_NVLINK_* settings");
  // Phases left to phase 2 change which calls every rank makes: only where every rank of the node has them on.
  int sumInReader = config_.sumInReader ? 1 : 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sumInReader, 1, MPI_INT, MPI_MIN, node_.get()));
  config_.sumInReader = sumInReader == 1;
  // Ranks sharing a GPU run their kernels side by side: a rank's next kernel, launched dependent, would wait on the GPU
  // beside its current one, which spins for another rank's kernel that may then find no room (dependent_launch.cuh).
  if (config_.shareGpus && config_.group.dependentLaunchMaxBytes == nvlink::kAutomatic)
    config_.group.dependentLaunchMaxBytes = 0;

  // 1. Who reaches whom.
  const std::vector<std::string> pciIds = AllGatherText(node_.get(), nvlink::CurrentDevicePciBusId());
  access_ = AllGatherMatrix(node_.get(), nvlink::PeerAccessRow(pciIds));
  for (int i = 0; i < ranks && !config_.shareGpus; ++i)
    for (int j = i + 1; j < ranks; ++j)
      if (pciIds[i] == pciIds[j])
        throw UsageError("local ranks " + std::to_string(i) + " and " + std::to_string(j) + " share GPU " + pciIds[i] +
                         " (" + RankAndHost() + "): run one rank per GPU");

  // 2. Fully connected groups, from the measured access or the access a topology file allows.
  try {
    if (!config_.accessOverride.empty()) access_ = RestrictPeerAccess(access_, config_.accessOverride);
    groups_ = SplitIntoFullyConnectedGroups(access_, config_.forcedGroupSize);
  } catch (const std::invalid_argument& error) {
    throw UsageError(std::string(error.what()) + " (" + RankAndHost() + ")");
  }
  // Lines (intra_node/cuda/line_packets.cuh) trust each 64-byte half of a line to land whole, measured over NVLink
  // only; NCCL keeps its LL128 off where it has not verified that. Inside a group whose GPUs do not all reach each
  // other with native atomics (NVLink does, PCIe peer-to-peer does not), the defaults keep to packets.
  if (!EveryPairInGroups(AllGatherMatrix(node_.get(), nvlink::NativeAtomicsRow(pciIds)), groups_)) {
    if (config_.group.oneShotLinesAbove == nvlink::kAutomatic) config_.group.oneShotLinesAbove = nvlink::kNever;
    if (config_.group.lineMaxBytes == nvlink::kAutomatic) config_.group.lineMaxBytes = 0;
    if (me == 0 && config_.traceLevel >= 1)
      std::cerr << "gradagg: packets, not lines: some GPUs of a group lack native atomics between them (not NVLink)\n";
  }
  const std::vector<std::string> names = AllGatherText(node_.get(), RankAndHost());
  if (!fullyConnected()) {
    if (config_.hostBetweenGroups) {
      hostWhy_ = "GRADAGG_NVLINK_HOST_BETWEEN_GROUPS=1";
    } else if (!GroupChain::Fits(groups_)) {
      hostWhy_ = "its groups differ in size";
    } else {
      const size_t size = groups_[0].size();
      for (size_t first = 0; first + size < static_cast<size_t>(ranks); ++first)
        directLinks_ += access_[first][first + size] && access_[first + size][first] ? 1 : 0;
      if (directLinks_ == 0) hostWhy_ = "no GPU reaches its counterpart in the next group";
    }
  }
  if (me == 0 && config_.traceLevel >= 1) std::cerr << "gradagg: " << DescribePeerAccess(access_, groups_);
  if (me == 0 && !fullyConnected() && !hostWhy_.empty())
    std::cerr << "gradagg: warning: the node's " << groups_.size()
              << " NVLink groups reduce through pinned host memory (" << hostWhy_ << ")\n";

  // 3. One group: peer memory across the node. A chain of groups, or the host twin.
  const MPI_Comm nodeComm = node_.get();
  if (fullyConnected()) {
    peers_ = std::make_unique<nvlink::PeerGroup>(me, names, BoundedAllGather(nodeComm, config_.group.timeoutSeconds),
                                                 config_.group);
  } else if (hostWhy_.empty()) {
    chain_ = std::make_unique<GroupChain>(nodeComm, groups_, access_, names, config_.group);
  } else {
    hostTwin_ = std::make_unique<SharedWindowPhase>(nodeComm, config_.group.timeoutSeconds);
  }
}

std::string GpuNode::Describe() const {
  const size_t size = groups_[0].size();
  if (fullyConnected()) return "one NVLink group of " + std::to_string(size);
  std::string text = std::to_string(groups_.size()) + " NVLink groups";
  if (GroupChain::Fits(groups_)) text += " of " + std::to_string(size);
  if (!chained()) return text + ", reduced through host memory (" + hostWhy_ + ")";
  const size_t links = (groups_.size() - 1) * size;
  return text + ", chained over " + std::to_string(directLinks_) + " peer-memory links and " +
         std::to_string(links - directLinks_) + " host links";
}

GpuNode::~GpuNode() {
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  if (!peers_ && !chain_) return;
  // Every rank unmaps its peers' memory, and only then frees its own: CUDA IPC breaks later exports of memory
  // freed while another process still maps it (seen on H200s). A peer may arrive late by up to a kernel's timeout
  // (it was waiting in a failed call), so the barrier waits twice that and more; a rank that never comes (an
  // exception on one rank only) then costs a leak and a warning, not a hang.
  try {
    if (peers_) peers_->UnmapPeers();
    if (chain_) chain_->UnmapPeers();
  } catch (...) {  // a destructor never throws: the GPU already failed; free what we can
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Request request = MPI_REQUEST_NULL;
  int done = 0;
  if (MPI_Ibarrier(node_.get(), &request) == MPI_SUCCESS) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(2 * config_.group.timeoutSeconds + 10);
    while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (done) return;  // peers_ or chain_ frees the memory
  std::cerr << "gradagg: warning: not every local rank closed its node group in time (" << RankAndHost()
            << "); its GPU memory stays allocated until the process ends\n";
  if (chain_) chain_->Abandon();
  chain_.release();  // leaked on purpose, see above
  peers_.release();
  node_.Release();  // the abandoned barrier still refers to it
}

void GpuNode::Abandon() noexcept {
  if (hostTwin_) hostTwin_->Abandon();
  if (chain_) {
    chain_->Abandon();
    chain_.release();  // leaked on purpose: peers may still map this rank's memory
    node_.Release();
  }
  if (!peers_) return;
  try {
    peers_->UnmapPeers();
  } catch (...) {  // the GPU may have failed already; nothing more to undo here
  }
  peers_.release();  // leaked on purpose: peers may still map this rank's memory
  node_.Release();
}

void GpuNode::Register(void* buffer, size_t bytes) {
  if (fullyConnected()) peers_->Register(buffer, bytes);
}

void GpuNode::Deregister(void* buffer) {
  if (fullyConnected()) peers_->Deregister(buffer);
}

bool GpuNode::RegisteredAlike(const void* buffer, size_t bytes) {
  if (!fullyConnected()) return false;
  size_t index = 0, offset = 0;
  const bool found = peers_->FindRegistration(buffer, bytes, index, offset);
  // One MIN over {found, index, -index, offset, -offset}: all found, and every index and offset the same.
  const auto i = static_cast<int64_t>(index), o = static_cast<int64_t>(offset);
  int64_t values[5] = {found ? 1 : 0, i, -i, o, -o};
  GRADAGG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, 5, MPI_INT64_T, MPI_MIN, node_.get()));
  return values[0] == 1 && values[1] == -values[2] && values[3] == -values[4];
}

size_t GpuNode::AnyBufferMaxBytes() const {
  if (!fullyConnected()) return ~size_t{0};
  const nvlink::PeerGroupConfig& config = peers_->config();
  return std::max({config.oneShotMaxBytes, config.packetMaxBytes, config.lineMaxBytes});
}

nvlink::PeerGroup& GpuNode::peers() {
  if (!peers_)
    throw UsageError("this node is not one fully connected group, so it has no peer group (" + RankAndHost() + ")");
  return *peers_;
}

void GpuNode::ThrowIfFailed() const {
  if (peers_) peers_->ThrowIfFailed();
  if (chain_) chain_->ThrowIfFailed();
}

void GpuNode::AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  if (fullyConnected()) {
    peers_->AllReduce(input, output, count, type, stream);
  } else if (chain_) {
    chain_->AllReduce(input, output, count, type, stream);
  } else {
    AllReduceThroughHost(input, output, count, type, stream);
  }
}

float* GpuNode::Pinned(size_t count) {
  if (count > pinnedElements_) {
    if (pinned_ != nullptr) GRADAGG_CUDA_CHECK(cudaFreeHost(pinned_));
    pinned_ = nullptr;
    pinnedElements_ = 0;
    GRADAGG_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_), count * sizeof(float)));
    pinnedElements_ = count;
  }
  return pinned_;
}

void GpuNode::ReduceScatter(const float* input, const std::vector<ElementRange>& shards, float* stripe,
                            cudaStream_t stream) {
  if (fullyConnected()) return peers_->ReduceScatter(input, shards, stripe, ElementType::kFloat32, stream);
  if (chain_) return chain_->ReduceScatter(input, shards, stripe, stream);
  const size_t count = shards.empty() ? 0 : shards.back().end();
  float* host = Pinned(count);
  GRADAGG_CUDA_CHECK(cudaMemcpyAsync(host, input, count * sizeof(float), cudaMemcpyDeviceToHost, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> hostStripe(shards[localRank()].count);
  hostTwin_->ReduceScatter(FlatBuffers({FloatSpan{host, count}}), shards, hostStripe.data());
  GRADAGG_CUDA_CHECK(
      cudaMemcpyAsync(stripe, hostStripe.data(), hostStripe.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

bool GpuNode::LeavePhasesToPhase2(const FlatBuffers& gradient, const std::vector<ElementRange>& shards,
                                  ValueTerms& terms, ValueCopies& copies) {
  if (!LeavesPhasesToPhase2()) return false;
  peers_->LeaveToReader(gradient.Contiguous(), shards, stream_, terms, copies);
  return true;
}

void GpuNode::FinishGather() { peers_->FinishGather(stream_); }

void GpuNode::AllGather(const float* stripe, const std::vector<ElementRange>& shards, float* output,
                        cudaStream_t stream) {
  if (fullyConnected()) return peers_->AllGather(stripe, shards, output, ElementType::kFloat32, stream);
  if (chain_) return chain_->AllGather(stripe, shards, output, stream);
  const size_t count = shards.empty() ? 0 : shards.back().end();
  float* host = Pinned(count);
  std::vector<float> hostStripe(shards[localRank()].count);
  GRADAGG_CUDA_CHECK(
      cudaMemcpyAsync(hostStripe.data(), stripe, hostStripe.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  hostTwin_->AllGather(hostStripe.data(), shards, FlatBuffers({FloatSpan{host, count}}));
  GRADAGG_CUDA_CHECK(cudaMemcpyAsync(output, host, count * sizeof(float), cudaMemcpyHostToDevice, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void GpuNode::AllReduceThroughHost(const void* input, void* output, size_t count, ElementType type,
                                   cudaStream_t stream) {
  if (type != ElementType::kFloat32)
    throw UsageError(std::string("a node whose NVLink groups reduce through host memory sums float32 only, not ") +
                     ToString(type) + " (" + RankAndHost() + ")");
  float* host = Pinned(count);
  GRADAGG_CUDA_CHECK(cudaMemcpyAsync(host, input, count * sizeof(float), cudaMemcpyDeviceToHost, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  // Shards as equal as CNTK's rule makes them; the host twin sums each in local-rank order.
  const size_t ranks = static_cast<size_t>(localRanks()), base = count / ranks, extra = count % ranks;
  std::vector<ElementRange> shards;
  for (size_t r = 0; r < ranks; ++r) shards.push_back({r * base + std::min(r, extra), base + (r < extra ? 1 : 0)});
  const FlatBuffers gradient({FloatSpan{host, count}});
  std::vector<float> stripe(shards[localRank()].count);
  hostTwin_->ReduceScatter(gradient, shards, stripe.data());
  hostTwin_->AllGather(stripe.data(), shards, gradient);
  GRADAGG_CUDA_CHECK(cudaMemcpyAsync(output, host, count * sizeof(float), cudaMemcpyHostToDevice, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gradagg

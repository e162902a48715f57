// The allreduce of buffers that are not registered: chunk by chunk through the group's staging area, which is.
#include <algorithm>

#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

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

}  // namespace gradagg::nvlink

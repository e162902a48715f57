// Whether the MPI library in this process accepts device pointers (a CUDA-aware build), as it says at run time.
#pragma once

#include <string>

#include "gradagg/device_gradient.h"

namespace gradagg {

struct MpiCudaSupport {
  bool cudaAware = false;
  std::string how;  // how we know: "MPIX_Query_cuda_support() = 1", "this MPI has no CUDA extension", ...
};

// Needs MPI initialised. The answer comes from the libmpi loaded now, not the one built against: Open MPI builds
// share one soname, so LD_LIBRARY_PATH can swap a CUDA-aware library in.
MpiCudaSupport QueryMpiCudaSupport();

// Phase 2's transport on this rank: what was asked (options.transport, GRADAGG_CUDA_AWARE_MPI), and for kAuto what
// MPI says. The library and the CLI's MPI_Allreduce baseline decide by this one rule.
struct TransportChoice {
  bool cudaAware = false;
  std::string why;                // "auto: MPIX_Query_cuda_support() = 1", "forced off; ...", ...
  bool forcedAgainstMpi = false;  // on, though MPI does not say it is CUDA-aware
};
TransportChoice ChooseTransport(MpiTransport requested);

}  // namespace gradagg

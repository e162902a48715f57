// Whether the MPI library in this process accepts device pointers (a CUDA-aware build), as it says at run time.
#pragma once

#include <string>

namespace gradagg {

struct MpiCudaSupport {
  bool cudaAware = false;
  std::string how;  // how we know: "MPIX_Query_cuda_support() = 1", "this MPI has no CUDA extension", ...
};

// Needs MPI initialised. The answer comes from the libmpi loaded now, not the one built against: Open MPI builds
// share one soname, so LD_LIBRARY_PATH can swap a CUDA-aware library in.
MpiCudaSupport QueryMpiCudaSupport();

}  // namespace gradagg

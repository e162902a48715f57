#include "mpi/cuda_support.h"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace gradagg {

MpiCudaSupport QueryMpiCudaSupport() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) || defined(OMPI_HAVE_MPI_EXT_CUDA)
  const int answer = MPIX_Query_cuda_support();
  return {answer == 1, "MPIX_Query_cuda_support() = " + std::to_string(answer)};
#else
  return {false, "this MPI has no CUDA extension (MPIX_Query_cuda_support)"};
#endif
}

TransportChoice ChooseTransport(MpiTransport requested) {
  const MpiCudaSupport support = QueryMpiCudaSupport();
  switch (requested) {
    case MpiTransport::kCudaAware:
      return {true, "forced on; " + support.how, !support.cudaAware};
    case MpiTransport::kStaged:
      return {false, "forced off; " + support.how};
    case MpiTransport::kAuto:
      break;
  }
  return {support.cudaAware, "auto: " + support.how};
}

}  // namespace gradagg

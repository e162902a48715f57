#include "mpi/mpi_environment.h"

#include <mpi.h>

#include "mpi/mpi_error.h"

namespace gradagg {

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int initialized = 0;
  GRADAGG_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    GRADAGG_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    ownsMpi_ = true;
  }
  GRADAGG_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (ownsMpi_ && !finalized) MPI_Finalize();  // a destructor never throws
}

}  // namespace gradagg

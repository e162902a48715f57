#include "mpi/communicator.h"

#include <utility>

#include "mpi/mpi_error.h"

namespace gradagg {

Communicator::Communicator(MPI_Comm comm) : comm_(comm) {
  if (comm_ != MPI_COMM_NULL) GRADAGG_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

Communicator::~Communicator() { Free(); }

Communicator::Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    Free();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  }
  return *this;
}

void Communicator::Free() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

int Communicator::rank() const {
  int rank = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  return rank;
}

int Communicator::size() const {
  int size = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm_, &size));
  return size;
}

Communicator Communicator::Duplicate(MPI_Comm comm) {
  MPI_Comm copy = MPI_COMM_NULL;
  GRADAGG_MPI_CHECK(MPI_Comm_dup(comm, &copy));
  return Communicator(copy);
}

Communicator Communicator::Split(int color, int key) const {
  MPI_Comm part = MPI_COMM_NULL;
  GRADAGG_MPI_CHECK(MPI_Comm_split(comm_, color, key, &part));
  return Communicator(part);
}

}  // namespace gradagg

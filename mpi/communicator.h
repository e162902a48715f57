// An owning MPI communicator: freed on destruction, errors returned (not fatal) on every call through it.
#pragma once

#include <mpi.h>

namespace gradagg {

class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(MPI_Comm comm);  // takes ownership; sets MPI_ERRORS_RETURN
  ~Communicator();
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;

  // Gives up ownership: the communicator is never freed (for one a pending operation may still use).
  MPI_Comm Release() noexcept {
    const MPI_Comm comm = comm_;
    comm_ = MPI_COMM_NULL;
    return comm;
  }

  static Communicator Duplicate(MPI_Comm comm);
  Communicator Split(int color, int key) const;

 private:
  void Free() noexcept;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace gradagg

// RAII for MPI itself: initialises MPI unless the program already did, and finalises only what it initialised.
#pragma once

namespace gradagg {

class MpiEnvironment {
 public:
  // MPI_THREAD_SERIALIZED (for background aggregation); MPI_COMM_WORLD returns errors instead of aborting.
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

 private:
  bool ownsMpi_ = false;
};

}  // namespace gradagg

// RAII for MPI itself: initialises MPI unless the program already did, and finalises only what it initialised.
#pragma once

namespace gradagg {

class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);  // MPI_THREAD_FUNNELED; MPI_COMM_WORLD returns errors instead of aborting
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

 private:
  bool ownsMpi_ = false;
};

}  // namespace gradagg

// Wall-clock seconds for per-phase timing.
#pragma once

#include <chrono>

namespace gradagg {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}

  // Seconds since construction or the previous Lap.
  double Lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gradagg

#include "aggregation_probe.h"

#include <mpi.h>

#include <cmath>
#include <stdexcept>

namespace gradagg::train {
namespace {

void Flatten(const GradientTensors& gradient, std::vector<double>& out) {
  if (gradient.onDevice()) throw std::invalid_argument("--probe needs the CPU model (--device cpu)");
  out.clear();
  for (const GradientBuffer& tensor : gradient.host) out.insert(out.end(), tensor.data, tensor.data + tensor.count);
}

void SumOverRanks(std::vector<double>& values) {
  if (MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM,
                    MPI_COMM_WORLD) != MPI_SUCCESS) {
    throw std::runtime_error("--probe: MPI_Allreduce failed");
  }
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

AggregationProbe::AggregationProbe(const std::string& path, size_t every, float gradientScale, int rank)
    : every_(every), gradientScale_(gradientScale), rank_(rank) {
  if (every_ == 0) throw std::invalid_argument("--probe-every must be at least 1");
  if (rank_ == 0) {
    csv_.open(path);
    if (!csv_) throw std::runtime_error("cannot write " + path);
    csv_ << "step,cosine,step_error,owed\n";
  }
}

void AggregationProbe::BeforeCarry(const GradientTensors& gradient) { Flatten(gradient, gradient_); }

void AggregationProbe::BeforeAggregation(const GradientTensors& gradient) { Flatten(gradient, sent_); }

void AggregationProbe::AfterAggregation(size_t step, const GradientTensors& aggregate) {
  std::vector<double> result;
  Flatten(aggregate, result);
  SumOverRanks(gradient_);
  SumOverRanks(sent_);
  owed_.resize(result.size(), 0.0);
  std::vector<double> used(result.size());  // G + e
  double errorSquares = 0.0;
  for (size_t i = 0; i < result.size(); ++i) {
    const double error = (result[i] - sent_[i]) / gradientScale_;
    used[i] = gradient_[i] + error;
    owed_[i] -= error;
    errorSquares += error * error;
  }
  if (rank_ != 0 || (step + 1) % every_ != 0) return;
  const double norm = std::sqrt(Dot(gradient_, gradient_));
  csv_ << step + 1 << "," << Dot(used, gradient_) / (std::sqrt(Dot(used, used)) * norm) << ","
       << std::sqrt(errorSquares) / norm << "," << std::sqrt(Dot(owed_, owed_)) / norm << "\n";
  csv_.flush();
}

}  // namespace gradagg::train

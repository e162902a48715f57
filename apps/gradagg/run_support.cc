#include "apps/gradagg/run_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "aggregator/serial_simulation.h"
#include "apps/gradagg/differences.h"
#include "apps/gradagg/synthetic_gradient.h"

namespace gradagg::cli {
namespace {

uint64_t Fnv1a(const float* values, size_t count) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values);
  for (size_t i = 0; i < count * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

// Every rank's input, gathered in pieces small enough for MPI's int counts.
std::vector<std::vector<float>> AllGatherInputs(MPI_Comm world, const std::vector<float>& mine) {
  int size = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_size(world, &size));
  std::vector<std::vector<float>> all(static_cast<size_t>(size), std::vector<float>(mine.size()));
  constexpr size_t kPiece = size_t{1} << 24;
  std::vector<float> gathered;
  for (size_t begin = 0; begin < mine.size(); begin += kPiece) {
    const size_t length = std::min(kPiece, mine.size() - begin);
    gathered.resize(length * static_cast<size_t>(size));
    GRADAGG_MPI_CHECK(MPI_Allgather(mine.data() + begin, static_cast<int>(length), MPI_FLOAT, gathered.data(),
                                    static_cast<int>(length), MPI_FLOAT, world));
    for (size_t r = 0; r < all.size(); ++r) {
      std::memcpy(all[r].data() + begin, gathered.data() + r * length, length * sizeof(float));
    }
  }
  return all;
}

double RelativeError(const std::vector<float>& result, const std::vector<std::vector<float>>& inputs) {
  double difference = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < result.size(); ++i) {
    double exact = 0.0;
    for (const std::vector<float>& input : inputs) exact += input[i];
    difference += (result[i] - exact) * (result[i] - exact);
    norm += exact * exact;
  }
  return norm > 0.0 ? std::sqrt(difference / norm) : std::sqrt(difference);
}

GradientHeader CheckHeader(int rank) {
  GradientHeader header;
  header.numSamples = static_cast<uint64_t>(rank) + 1;
  header.numSamplesWithLabel = 1;
  header.criterion = rank * 0.5;
  header.evalErrors = {{1.0, 2}};
  return header;
}

void JudgeStep(MPI_Comm world, int step, const std::vector<float>& result, const std::vector<float>& expected,
               const GradientHeader& header, uint64_t& wrong, int& bad) {
  int ranks = 1, rank = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_size(world, &ranks));
  GRADAGG_MPI_CHECK(MPI_Comm_rank(world, &rank));
  const auto size = static_cast<uint64_t>(ranks);
  const Differences differences = CompareBitwise(result, expected);
  wrong += differences.count;
  if (differences.count > 0)
    std::fprintf(stderr, "gradagg: check: rank %d, step %d: %s from the serial simulation\n", rank, step,
                 differences.description.c_str());
  const uint64_t hash = Fnv1a(result.data(), result.size());
  std::vector<uint64_t> hashes(size);
  GRADAGG_MPI_CHECK(MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, world));
  if (std::any_of(hashes.begin(), hashes.end(), [&](uint64_t h) { return h != hashes[0]; })) bad |= 1;
  const bool headerOk = header.numSamples == size * (size + 1) / 2 && header.numSamplesWithLabel == size &&
                        header.criterion == 0.25 * static_cast<double>(size * (size - 1)) &&
                        header.evalErrors.size() == 1 && header.evalErrors[0].numSamples == 2 * size &&
                        header.evalErrors[0].errorSum == static_cast<double>(size);
  if (!headerOk) bad |= 2;
}

void SetVerdict(MPI_Comm world, uint64_t wrong, int bad, SizeResult& result) {
  uint64_t totalWrong = 0;
  int anyBad = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&wrong, &totalWrong, 1, MPI_UINT64_T, MPI_SUM, world));
  GRADAGG_MPI_CHECK(MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_BOR, world));
  result.checked = true;
  result.wrong = totalWrong;
  result.identical = (anyBad & 1) == 0;
  result.headerOk = (anyBad & 2) == 0;
}

constexpr int kCheckSteps = 2;  // the second step checks that residuals carry over as in the simulation

}  // namespace

void CheckAgainstSimulation(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli,
                            SizeResult& result,
                            const std::function<void(std::vector<float>&, GradientHeader*)>& aggregateInPlace) {
  MPI_Comm world = topology.world();
  const int rank = topology.rank();
  SerialSimulation simulation(topology.GatherPlacements(), aggregator.options());
  aggregator.ResetResiduals();
  uint64_t wrong = 0;
  int bad = 0;
  for (int step = 0; step < kCheckSteps; ++step) {
    std::vector<float> gradient(result.count);
    FillSyntheticGradient(gradient.data(), gradient.size(), cli.seed, rank, step);
    const std::vector<std::vector<float>> inputs = AllGatherInputs(world, gradient);
    GradientHeader header = CheckHeader(rank);
    aggregateInPlace(gradient, &header);
    JudgeStep(world, step, gradient, simulation.Run(inputs, {}, TensorLengths(cli.tensors, result.count)), header,
              wrong, bad);
    if (step == 0) result.relativeError = RelativeError(gradient, inputs);
  }
  SetVerdict(world, wrong, bad, result);
}

void MpiAllreduce(MPI_Comm world, float* data, size_t count) {
  constexpr size_t kPiece = size_t{1} << 28;
  for (size_t begin = 0; begin < count; begin += kPiece) {
    const int length = static_cast<int>(std::min(kPiece, count - begin));
    GRADAGG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + begin, length, MPI_FLOAT, MPI_SUM, world));
  }
}

void PhaseStats::Add(const AggregationStats& stats) {
  const PhaseTimes& t = stats.times;
  const double each[kPhases] = {t.agreement, t.reduceScatter, t.quantize, t.exchange, t.decode, t.allGather};
  for (int p = 0; p < kPhases; ++p) phases_[p] += each[p] / iterations_;
  wireBytes_ = stats.interNodeBytesSent;
  floatWireBytes_ = stats.interNodeFloatBytes;
}

void PhaseStats::Finish(MPI_Comm world, SizeResult& result) const {
  double slowest[kPhases];
  GRADAGG_MPI_CHECK(MPI_Allreduce(phases_, slowest, kPhases, MPI_DOUBLE, MPI_MAX, world));
  uint64_t wire = 0, floatWire = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&wireBytes_, &wire, 1, MPI_UINT64_T, MPI_MAX, world));
  GRADAGG_MPI_CHECK(MPI_Allreduce(&floatWireBytes_, &floatWire, 1, MPI_UINT64_T, MPI_MAX, world));
  result.wireBytes = wire;
  result.floatWireBytes = floatWire;
  result.phases = {slowest[0], slowest[1], slowest[2], slowest[3], slowest[4], slowest[5], result.seconds};
}

}  // namespace gradagg::cli

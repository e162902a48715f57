#include "apps/gradagg/size_run.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "aggregator/serial_simulation.h"
#include "apps/gradagg/synthetic_gradient.h"
#include "mpi_glue/mpi_error.h"

namespace gradagg::cli {
namespace {

constexpr int kCheckSteps = 2;  // the second step checks that residuals carry over as in the simulation

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

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

void Check(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, SizeResult& result) {
  MPI_Comm world = topology.world();
  const int rank = topology.rank();
  const auto size = static_cast<uint64_t>(topology.size());
  SerialSimulation simulation(topology.GatherPlacements(), aggregator.options());
  aggregator.ResetResiduals();
  uint64_t wrong = 0;
  int bad = 0;
  for (int step = 0; step < kCheckSteps; ++step) {
    std::vector<float> gradient(result.count);
    FillSyntheticGradient(gradient.data(), gradient.size(), cli.seed, rank, step);
    const std::vector<std::vector<float>> inputs = AllGatherInputs(world, gradient);

    // Rank r reports r + 1 samples and criterion r / 2, so the sums are known.
    GradientHeader header;
    header.numSamples = static_cast<uint64_t>(rank) + 1;
    header.numSamplesWithLabel = 1;
    header.criterion = rank * 0.5;
    header.evalErrors = {{1.0, 2}};
    aggregator.AggregateGradients(gradient.data(), gradient.size(), &header);

    const std::vector<float> expected = simulation.Run(inputs);
    for (size_t i = 0; i < expected.size(); ++i) {
      wrong += BitsOf(expected[i]) != BitsOf(gradient[i]) ? 1 : 0;
    }
    const uint64_t hash = Fnv1a(gradient.data(), gradient.size());
    std::vector<uint64_t> hashes(size);
    GRADAGG_MPI_CHECK(MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, world));
    if (std::any_of(hashes.begin(), hashes.end(), [&](uint64_t h) { return h != hashes[0]; })) bad |= 1;
    const bool headerOk = header.numSamples == size * (size + 1) / 2 && header.numSamplesWithLabel == size &&
                          header.criterion == 0.25 * static_cast<double>(size * (size - 1)) &&
                          header.evalErrors.size() == 1 && header.evalErrors[0].numSamples == 2 * size &&
                          header.evalErrors[0].errorSum == static_cast<double>(size);
    if (!headerOk) bad |= 2;
    if (step == 0) result.relativeError = RelativeError(gradient, inputs);
  }
  uint64_t totalWrong = 0;
  int anyBad = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&wrong, &totalWrong, 1, MPI_UINT64_T, MPI_SUM, world));
  GRADAGG_MPI_CHECK(MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_BOR, world));
  result.checked = true;
  result.wrong = totalWrong;
  result.identical = (anyBad & 1) == 0;
  result.headerOk = (anyBad & 2) == 0;
}

// Runs `call` on a copy of `pristine`: `warmups` untimed calls, then timed ones, each from the same input (sums
// would otherwise grow without bound) restored outside the timing and started together after a barrier. Returns
// the mean over iterations of the slowest rank's seconds; afterEach() runs after every timed call.
template <typename Call, typename AfterEach>
double TimeCalls(MPI_Comm world, const CliOptions& cli, const std::vector<float>& pristine, Call call,
                 AfterEach afterEach) {
  std::vector<float> gradient(pristine);
  for (int i = 0; i < cli.warmups; ++i) {
    std::memcpy(gradient.data(), pristine.data(), pristine.size() * sizeof(float));
    call(gradient);
  }
  std::vector<double> seconds(static_cast<size_t>(cli.iterations));
  for (int i = 0; i < cli.iterations; ++i) {
    std::memcpy(gradient.data(), pristine.data(), pristine.size() * sizeof(float));
    GRADAGG_MPI_CHECK(MPI_Barrier(world));
    const double start = MPI_Wtime();
    call(gradient);
    seconds[static_cast<size_t>(i)] = MPI_Wtime() - start;
    afterEach();
  }
  std::vector<double> slowest(seconds.size());
  GRADAGG_MPI_CHECK(MPI_Allreduce(seconds.data(), slowest.data(), cli.iterations, MPI_DOUBLE, MPI_MAX, world));
  double sum = 0.0;
  for (double s : slowest) sum += s;
  return sum / static_cast<double>(slowest.size());
}

// MPI_Allreduce in place, in pieces that fit MPI's int counts.
void MpiAllreduce(MPI_Comm world, std::vector<float>& gradient) {
  constexpr size_t kPiece = size_t{1} << 28;
  for (size_t begin = 0; begin < gradient.size(); begin += kPiece) {
    const int length = static_cast<int>(std::min(kPiece, gradient.size() - begin));
    GRADAGG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, gradient.data() + begin, length, MPI_FLOAT, MPI_SUM, world));
  }
}

void Time(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, SizeResult& result) {
  MPI_Comm world = topology.world();
  std::vector<float> pristine(result.count);
  FillSyntheticGradient(pristine.data(), pristine.size(), cli.seed, topology.rank(), 0);

  constexpr int kPhases = 6;
  double phases[kPhases] = {};
  size_t wireBytes = 0;
  size_t floatWireBytes = 0;
  result.seconds = TimeCalls(
      world, cli, pristine, [&](std::vector<float>& g) { aggregator.AggregateGradients(g.data(), g.size()); },
      [&] {
        const AggregationStats& stats = aggregator.LastStats();
        const PhaseTimes& t = stats.times;
        const double each[kPhases] = {t.agreement, t.reduceScatter, t.quantize, t.exchange, t.decode, t.allGather};
        for (int p = 0; p < kPhases; ++p) phases[p] += each[p] / cli.iterations;
        wireBytes = stats.interNodeBytesSent;
        floatWireBytes = stats.interNodeFloatBytes;
      });
  double slowestPhases[kPhases];
  GRADAGG_MPI_CHECK(MPI_Allreduce(phases, slowestPhases, kPhases, MPI_DOUBLE, MPI_MAX, world));
  GRADAGG_MPI_CHECK(MPI_Allreduce(&wireBytes, &result.wireBytes, 1, MPI_UINT64_T, MPI_MAX, world));
  GRADAGG_MPI_CHECK(MPI_Allreduce(&floatWireBytes, &result.floatWireBytes, 1, MPI_UINT64_T, MPI_MAX, world));
  result.phases = {slowestPhases[0], slowestPhases[1], slowestPhases[2], slowestPhases[3],
                   slowestPhases[4], slowestPhases[5], result.seconds};

  if (cli.mpiBaseline) {
    result.mpiSeconds = TimeCalls(
        world, cli, pristine, [&](std::vector<float>& g) { MpiAllreduce(world, g); }, [] {});
  }
}

}  // namespace

SizeResult RunSize(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, size_t bytes) {
  SizeResult result;
  result.bytes = bytes;
  result.count = bytes / sizeof(float);
  if (cli.check) Check(aggregator, topology, cli, result);
  Time(aggregator, topology, cli, result);
  return result;
}

}  // namespace gradagg::cli

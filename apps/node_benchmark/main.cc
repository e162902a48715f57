// gradagg_node_benchmark: the intra-node phases on CPU ranks (the shared window of intra_node/shared_window_phase.h)
// beside what Open MPI offers for the same job, and the memory floor, in one run on the ranks of one node:
//   gradagg fused   SharedWindowPhase::AllReduce: phases 1 and 3 of a one-node job
//   gradagg rs+ag   ReduceScatter then AllGather through a stripe: phases 1 and 3 around a phase 2
//   MPI allreduce   MPI_Allreduce(MPI_IN_PLACE, MPI_SUM)
//   MPI rs+ag       MPI_Reduce_scatter_block then MPI_Allgather (in place)
//   floor           memcpy of the gradient, on every rank at once: any allreduce reads each rank's gradient and
//                   writes the sum over it at least once; the fused path's chunks meet in the shared cache, so that
//                   is all it must move to and from memory
// Each repetition runs every variant once, in turn, after restoring the gradient; a variant's time per repetition is
// its slowest rank's, and the table shows the median over repetitions. Every variant's result is checked against
// the exact sum (the test values are small integers) in #wrong.
//   mpirun -np G gradagg_node_benchmark -b 64K -e 256M -f 4 -n 20 -w 3
#include <mpi.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "apps/common/median.h"
#include "apps/common/size_sweep.h"
#include "mpi/mpi_error.h"
#include "intra_node/ordered_sum.h"
#include "intra_node/shared_window_phase.h"

namespace gradagg {
namespace {

bool Parse(int argc, char** argv, cli::SizeSweep& sweep, int rank, bool& help) {
  namespace po = boost::program_options;
  po::options_description flags(
      "gradagg_node_benchmark: gradagg's intra-node phases on CPU ranks beside MPI_Allreduce and MPI's "
      "reduce-scatter + all-gather, with the memory floor (mpirun, ranks of one node)");
  flags.add_options()("help,h", "this text");
  cli::SweepFlags sweepFlags(sweep, flags, "repetitions");
  po::variables_map values;
  const std::string error = sweepFlags.Parse(argc, argv, flags, values, sizeof(float));
  help = values.count("help") > 0;
  if (rank == 0 && (help || !error.empty())) {
    if (!error.empty()) std::cerr << "gradagg_node_benchmark: " << error << "\n";
    std::cout << flags;
  }
  return error.empty() && !help;
}

// Rank r's element i: a small integer, so that every order of summing gives the same exact float.
float TestValue(int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) * 7 + i) % 13); }

struct Variant {
  std::string name;
  std::function<void()> run;
  bool checked;  // the floor's memcpy leaves no sum behind
  std::vector<double> seconds{};
  size_t wrong = 0;
};

// Times and checks one size; returns the elements that came out wrong on this rank.
size_t RunSize(MPI_Comm node, SharedWindowPhase& phase, const cli::SizeSweep& settings, size_t count) {
  int rank = 0, size = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(node, &rank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(node, &size));
  const size_t ranks = static_cast<size_t>(size);
  const size_t padded = (count + ranks - 1) / ranks * ranks;  // MPI_Reduce_scatter_block takes equal blocks
  std::vector<float> pristine(padded, 0.0f), gradient(padded), stripe(padded / ranks), scratch(padded);
  for (size_t i = 0; i < count; ++i) pristine[i] = TestValue(rank, i);

  const FlatBuffers flat({FloatSpan{gradient.data(), count}});
  std::vector<ElementRange> shards;
  for (size_t l = 0; l < ranks; ++l) {
    const size_t begin = count * l / ranks, end = count * (l + 1) / ranks;
    shards.push_back({begin, end - begin});
  }
  const int block = static_cast<int>(padded / ranks);
  std::vector<Variant> variants;
  variants.push_back({"gradagg fused", [&] { phase.AllReduce(flat); }, true});
  variants.push_back({"gradagg rs+ag",
                      [&] {
                        phase.ReduceScatter(flat, shards, stripe.data());
                        phase.AllGather(stripe.data(), shards, flat);
                      },
                      true});
  variants.push_back({"MPI allreduce",
                      [&] {
                        GRADAGG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, gradient.data(), static_cast<int>(count),
                                                        MPI_FLOAT, MPI_SUM, node));
                      },
                      true});
  variants.push_back(
      {"MPI rs+ag",
       [&] {
         GRADAGG_MPI_CHECK(MPI_Reduce_scatter_block(gradient.data(), stripe.data(), block, MPI_FLOAT, MPI_SUM, node));
         GRADAGG_MPI_CHECK(MPI_Allgather(stripe.data(), block, MPI_FLOAT, gradient.data(), block, MPI_FLOAT, node));
       },
       true});
  variants.push_back({"memcpy", [&] { std::memcpy(scratch.data(), gradient.data(), count * sizeof(float)); }, false});

  for (int repetition = -settings.warmups; repetition < settings.iterations; ++repetition) {
    for (Variant& variant : variants) {
      std::memcpy(gradient.data(), pristine.data(), padded * sizeof(float));
      GRADAGG_MPI_CHECK(MPI_Barrier(node));
      const double start = MPI_Wtime();
      variant.run();
      double seconds = MPI_Wtime() - start;
      GRADAGG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, node));
      if (repetition >= 0) variant.seconds.push_back(seconds);
      if (!variant.checked || repetition != 0) continue;
      for (size_t i = 0; i < count; ++i) {
        float expected = 0.0f;
        for (int r = 0; r < size; ++r) expected += TestValue(r, i);
        if (gradient[i] != expected) ++variant.wrong;
      }
    }
  }
  const double floor = cli::Median(variants[4].seconds);
  const double allreduce = cli::Median(variants[2].seconds);
  const size_t wrong = variants[0].wrong + variants[1].wrong + variants[2].wrong + variants[3].wrong;
  if (rank != 0) return wrong;
  std::printf("%12zu %10zu", count * sizeof(float), count);
  for (size_t v = 0; v < 4; ++v) std::printf(" %10.1f", 1e6 * cli::Median(variants[v].seconds));
  std::printf(" %10.1f %7.2f %7.2f %7.2f %6zu\n", 1e6 * floor, allreduce / cli::Median(variants[0].seconds),
              allreduce / cli::Median(variants[1].seconds), floor / cli::Median(variants[0].seconds), wrong);
  return wrong;
}

int Run(int argc, char** argv) {
  MPI_Comm world = MPI_COMM_WORLD, node = MPI_COMM_NULL;
  int worldRank = 0, worldSize = 1, nodeSize = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(world, &worldRank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(world, &worldSize));
  cli::SizeSweep settings{64 << 10, 256 << 20, 4, 20, 3};
  bool help = false;
  if (!Parse(argc, argv, settings, worldRank, help)) return help ? 0 : 2;
  GRADAGG_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  GRADAGG_MPI_CHECK(MPI_Comm_size(node, &nodeSize));
  if (nodeSize != worldSize) {
    if (worldRank == 0) std::fprintf(stderr, "gradagg_node_benchmark: run every rank on one node\n");
    return 2;
  }
  uint64_t wrong = 0;
  {
    SharedWindowPhase phase(node, 300.0);
    if (worldRank == 0) {
      std::printf("# %d ranks on one node; sums on %s; medians over %d repetitions after %d warm-ups\n", nodeSize,
                  OrderedSumTarget(), settings.iterations, settings.warmups);
      std::printf("# vs_mpi: MPI_Allreduce's time / gradagg's; of_flr: floor (memcpy of the gradient) / fused\n");
      std::printf("#%11s %10s %10s %10s %10s %10s %10s %7s %7s %7s %6s\n", "size", "count", "fused", "rs+ag",
                  "allreduce", "mpi_rs+ag", "floor", "vs_mpi", "rsag_vs", "of_flr", "#wrong");
      std::printf("#%11s %10s %10s %10s %10s %10s %10s %7s %7s %7s %6s\n", "(B)", "(elements)", "(us)", "(us)", "(us)",
                  "(us)", "(us)", "fused", "mpi", "", "");
    }
    for (uint64_t bytes = settings.minBytes; bytes <= settings.maxBytes; bytes *= settings.factor) {
      wrong += RunSize(node, phase, settings, bytes / sizeof(float));
    }
  }
  GRADAGG_MPI_CHECK(MPI_Comm_free(&node));
  GRADAGG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, world));
  if (worldRank == 0) std::printf("# %s\n", wrong == 0 ? "every element right" : "FAIL: wrong elements");
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gradagg

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 1;
  try {
    code = gradagg::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradagg_node_benchmark: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}

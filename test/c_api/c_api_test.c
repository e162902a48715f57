/* The C API from C, under mpirun: exact float32 sums and a summed header at 32 bits, the same bits on every rank at
 * 1 bit, a usage error as a status with its message. Exits 0 and prints "c_api_test: PASS" only if all hold.
 * GRADAGG_RANKS_PER_NODE (read by gradagg_options_init) chooses the emulated nodes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradagg/gradagg_c.h"

static int failures = 0;

#define EXPECT(condition, ...)                         \
  do {                                                 \
    if (!(condition)) {                                \
      fprintf(stderr, "c_api_test: rank %d: ", rank);  \
      fprintf(stderr, __VA_ARGS__);                    \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
      ++failures;                                      \
    }                                                  \
  } while (0)

enum { kWeights = 1000, kBias = 3 };

int main(void) {
  int rank = 0, size = 1, provided = 0;
  if (gradagg_mpi_init(&provided) != GRADAGG_OK) {
    fprintf(stderr, "c_api_test: gradagg_mpi_init: %s\n", gradagg_last_error());
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* 32 bits: exact sums of values that float32 holds exactly, and the header. */
  gradagg_options options;
  EXPECT(gradagg_options_init(&options) == GRADAGG_OK, "options_init: %s", gradagg_last_error());
  options.bits = 32;
  gradagg_aggregator* exact = NULL;
  EXPECT(gradagg_create(GRADAGG_COMM_WORLD, &options, &exact) == GRADAGG_OK, "create: %s", gradagg_last_error());
  static float weights[kWeights], bias[kBias];
  for (int i = 0; i < kWeights; ++i) weights[i] = (float)(rank + 1) * 0.25f + (float)(i % 7);
  for (int i = 0; i < kBias; ++i) bias[i] = (float)(rank * 1000 + i);
  gradagg_tensor tensors[2] = {{weights, kWeights, GRADAGG_FLOAT32}, {bias, kBias, GRADAGG_FLOAT32}};
  double errorSum = 1.5;
  uint64_t errorSamples = (uint64_t)rank;
  gradagg_header header = {(uint64_t)(rank + 1), 1, 2.0, 1, &errorSum, &errorSamples};
  EXPECT(gradagg_aggregate(exact, tensors, 2, &header) == GRADAGG_OK, "aggregate: %s", gradagg_last_error());
  const double ranksSum = (double)size * (size + 1) / 2.0;
  for (int i = 0; i < kWeights; ++i) {
    const float expected = (float)(0.25 * ranksSum + (double)size * (i % 7));
    if (weights[i] != expected) {
      EXPECT(0, "weights[%d] = %g, expected %g", i, weights[i], expected);
      break;
    }
  }
  for (int i = 0; i < kBias; ++i) {
    EXPECT(bias[i] == (float)(1000.0 * (size - 1) * size / 2.0 + (double)size * i), "bias[%d] = %g", i, bias[i]);
  }
  EXPECT(header.num_samples == (uint64_t)ranksSum, "num_samples %llu", (unsigned long long)header.num_samples);
  EXPECT(header.num_samples_with_label == (uint64_t)size && header.criterion == 2.0 * size, "header fields");
  EXPECT(errorSum == 1.5 * size && errorSamples == (uint64_t)(size * (size - 1) / 2), "eval errors");
  EXPECT(gradagg_destroy(exact) == GRADAGG_OK, "destroy");

  /* 1 bit: every rank ends with the same bits. */
  options.bits = 1;
  gradagg_aggregator* onebit = NULL;
  EXPECT(gradagg_create(GRADAGG_COMM_WORLD, &options, &onebit) == GRADAGG_OK, "create 1 bit: %s", gradagg_last_error());
  for (int i = 0; i < kWeights; ++i) weights[i] = (float)((i * 37 + rank * 11) % 23) - 11.0f;
  EXPECT(gradagg_aggregate(onebit, tensors, 1, NULL) == GRADAGG_OK, "aggregate 1 bit: %s", gradagg_last_error());
  static float first[kWeights];
  memcpy(first, weights, sizeof first);
  MPI_Bcast(first, kWeights, MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT(memcmp(first, weights, sizeof first) == 0, "1-bit result differs from rank 0's");
  gradagg_stats stats;
  EXPECT(gradagg_last_stats(onebit, &stats) == GRADAGG_OK, "last_stats");
  int nodes = 0;
  EXPECT(gradagg_topology(onebit, NULL, NULL, &nodes, NULL) == GRADAGG_OK, "topology");
  EXPECT((nodes > 1) == (stats.inter_node_bytes_sent > 0), "%d nodes but %zu bytes across nodes", nodes,
         stats.inter_node_bytes_sent);
  EXPECT(strstr(gradagg_describe(onebit), "bits=1") != NULL, "describe: %s", gradagg_describe(onebit));
  EXPECT(gradagg_destroy(onebit) == GRADAGG_OK, "destroy 1 bit");

  /* Bad input: a status and a message naming it, on every rank; nothing created. */
  options.bits = 3;
  gradagg_aggregator* bad = NULL;
  EXPECT(gradagg_create(GRADAGG_COMM_WORLD, &options, &bad) == GRADAGG_ERROR_USAGE, "bits 3 accepted");
  EXPECT(bad == NULL && strstr(gradagg_last_error(), "bits") != NULL, "message: %s", gradagg_last_error());

  int anyFailure = 0;
  MPI_Allreduce(&failures, &anyFailure, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && anyFailure == 0) printf("c_api_test: PASS on %d ranks, %d nodes\n", size, nodes);
  gradagg_mpi_finalize();
  return anyFailure == 0 ? 0 : 1;
}

/* The installed C API from a C program: every rank contributes rank+1; one node, so the sum is exact. */
#include <gradagg/gradagg_c.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float gradient[100];
  for (int i = 0; i < 100; ++i) gradient[i] = (float)(rank + 1);
  gradagg_aggregator* aggregator = NULL;
  gradagg_tensor tensor = {gradient, 100, GRADAGG_FLOAT32};
  int status = gradagg_create(MPI_Comm_c2f(MPI_COMM_WORLD), NULL, &aggregator) != GRADAGG_OK;
  status |= gradagg_aggregate(aggregator, &tensor, 1, NULL) != GRADAGG_OK;
  for (int i = 0; i < 100; ++i) status |= gradient[i] != (float)(size * (size + 1) / 2);
  if (status != 0) fprintf(stderr, "c_consumer: rank %d failed: %s\n", rank, gradagg_last_error());
  gradagg_destroy(aggregator);
  if (rank == 0 && status == 0) printf("c_consumer: PASS\n");
  MPI_Finalize();
  return status;
}

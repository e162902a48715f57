/* gradagg's C API: the Aggregator of gradagg/aggregator.h behind opaque handles, for C programs and for other
 * languages (the Python package loads it with ctypes). Link gradagg::gradagg_c (libgradagg_c.so).
 *
 *   gradagg_options options;
 *   gradagg_options_init(&options);              // defaults, then the GRADAGG_* environment variables
 *   options.bits = 1;
 *   gradagg_aggregator* agg = NULL;
 *   if (gradagg_create(GRADAGG_COMM_WORLD, &options, &agg) != GRADAGG_OK) fail(gradagg_last_error());
 *   gradagg_tensor tensors[2] = {{weights, n_weights, GRADAGG_FLOAT32}, {bias, n_bias, GRADAGG_FLOAT32}};
 *   gradagg_aggregate(agg, tensors, 2, NULL);    // in place: every rank ends with bitwise the same sum
 *   gradagg_destroy(agg);
 *
 * MPI must be initialised first (by the program, by mpi4py, or by gradagg_mpi_init). Every call but
 * gradagg_last_error returns a status; on failure, gradagg_last_error() gives the message (the same on every rank for
 * usage errors, which every rank reports together). No call throws or aborts. This header needs neither MPI's nor
 * CUDA's headers: communicators travel as Fortran handles (MPI_Comm_c2f, or mpi4py's comm.py2f()), streams as void*.
 */
#ifndef GRADAGG_GRADAGG_C_H_
#define GRADAGG_GRADAGG_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GRADAGG_C_EXPORT __attribute__((visibility("default")))
#else
#define GRADAGG_C_EXPORT
#endif

#define GRADAGG_C_API_VERSION 6

typedef enum gradagg_status {
  GRADAGG_OK = 0,
  GRADAGG_ERROR_USAGE = 1,   /* bad or mismatched arguments; reported on every rank of the call */
  GRADAGG_ERROR_TIMEOUT = 2, /* a peer stopped answering (GRADAGG_TIMEOUT); end the job */
  GRADAGG_ERROR_RUNTIME = 3, /* MPI, CUDA or another failure on this rank; end the job */
} gradagg_status;

typedef enum gradagg_element_type {
  GRADAGG_FLOAT32 = 0,
  GRADAGG_BFLOAT16 = 1, /* device tensors only */
  GRADAGG_FLOAT16 = 2,  /* device tensors only */
} gradagg_element_type;

/* gradagg/options.h's AggregatorOptions, field by field (see there for meanings and ranges). */
typedef struct gradagg_options {
  int bits;                   /* 1, 2, 4, 8; 32 sends raw floats */
  size_t bucket_size;         /* elements per quantization bucket */
  int error_feedback;         /* 0 or 1 */
  int mean_threshold;         /* 0 or 1 */
  int quantize_own_stripe;    /* 0 or 1 */
  int ranks_per_node;         /* 0 = one node per host */
  int cuda_aware_mpi;         /* -1 auto, 0 staged, 1 CUDA-aware */
  size_t staging_chunk_bytes; /* staged transport chunk */
  int double_buffered;        /* 0 or 1 */
  double timeout_seconds;     /* 0 = wait for ever */
  int timing;                 /* 0 or 1: per-phase times in gradagg_stats */
  int trace_level;            /* 0, 1, 2, 3 (GRADAGG_TRACE) */
  size_t piece_bytes;         /* phase 2's pieces, bytes of codes; 0 = one piece (since version 2) */
} gradagg_options;

/* A tensor: host memory (gradagg_aggregate, float32 only) or device memory of the rank's current GPU. */
typedef struct gradagg_tensor {
  void* data;
  size_t count; /* elements */
  int type;     /* gradagg_element_type */
} gradagg_tensor;

/* gradagg/gradient_header.h's GradientHeader, summed over all ranks in place. The arrays are the caller's
 * (eval_error_count entries each, the same count on every rank); num_samples == 0 contributes zero gradients. */
typedef struct gradagg_header {
  uint64_t num_samples;
  uint64_t num_samples_with_label;
  double criterion;
  size_t eval_error_count;
  double* eval_error_sums;
  uint64_t* eval_error_samples;
} gradagg_header;

/* Of the last call that finished (gradagg/aggregator.h's AggregationStats); times in seconds. */
typedef struct gradagg_stats {
  double agreement, reduce_scatter, quantize, exchange, decode, all_gather, total;
  size_t inter_node_bytes_sent;
  size_t inter_node_float_bytes;
  size_t non_finite_buckets;
  int in_place;
} gradagg_stats;

typedef struct gradagg_aggregator gradagg_aggregator;
typedef struct gradagg_pending gradagg_pending;

/* The communicator argument of gradagg_create for MPI_COMM_WORLD. */
#define GRADAGG_COMM_WORLD (-1)

/* The message of this thread's last failed call ("" if none). Valid until this thread's next gradagg call. */
GRADAGG_C_EXPORT const char* gradagg_last_error(void);

/* Initialises MPI (MPI_Init_thread, asking for MPI_THREAD_MULTIPLE) unless it already is; *provided (may be NULL)
 * gets the thread level MPI gave. gradagg_mpi_finalize finalises it only if gradagg_mpi_init initialised it. */
GRADAGG_C_EXPORT gradagg_status gradagg_mpi_init(int* provided);
GRADAGG_C_EXPORT gradagg_status gradagg_mpi_finalize(void);
/* This process's rank in MPI_COMM_WORLD and its size (any pointer may be NULL), whatever MPI launched it;
 * GRADAGG_ERROR_USAGE before MPI is initialised. (Since version 6.) */
GRADAGG_C_EXPORT gradagg_status gradagg_world(int* rank, int* size);

/* Ends every rank of MPI_COMM_WORLD at once (MPI_Abort with exit code `code`), for a rank that cannot go on: the
 * others would otherwise wait for it until their timeout. Does not return while MPI is initialised and not
 * finalised; otherwise returns GRADAGG_ERROR_USAGE. (Since version 3.) */
GRADAGG_C_EXPORT gradagg_status gradagg_mpi_abort(int code);

/* The defaults, then every GRADAGG_* environment variable that is set (GRADAGG_ERROR_USAGE for an unparsable one). */
GRADAGG_C_EXPORT gradagg_status gradagg_options_init(gradagg_options* options);

/* Collective over `fortran_comm` (GRADAGG_COMM_WORLD, or MPI_Comm_c2f of a communicator; it is duplicated). */
GRADAGG_C_EXPORT gradagg_status gradagg_create(int64_t fortran_comm, const gradagg_options* options,
                                               gradagg_aggregator** aggregator);
/* Collective over `fortran_comm`: an aggregator of shards (gradagg/shard_aggregator.h) for sharded training. Every
 * rank of a node (options->ranks_per_node, as for gradagg_create) holds its own shard, already reduced over the node;
 * gradagg_aggregate and gradagg_aggregate_device then sum it across the nodes among the ranks of its local index, and
 * a failure anywhere is reported on every rank. Stats, residuals and gradagg_topology are those of the exchange
 * across the nodes (rank and size among the ranks of the local index, nodes of one rank); the async calls are
 * refused. (Since version 5.) */
GRADAGG_C_EXPORT gradagg_status gradagg_create_shard(int64_t fortran_comm, const gradagg_options* options,
                                                     gradagg_aggregator** aggregator);
/* Waits for a background call still running, then frees everything. Local. NULL is fine. After MPI_Finalize it
 * frees nothing (MPI's resources are gone with MPI): destroy aggregators before finalising. */
GRADAGG_C_EXPORT gradagg_status gradagg_destroy(gradagg_aggregator* aggregator);

/* Collective, in place. Host tensors must be float32; `header` may be NULL (on every rank, or on none). */
GRADAGG_C_EXPORT gradagg_status gradagg_aggregate(gradagg_aggregator* aggregator, const gradagg_tensor* tensors,
                                                  size_t count, gradagg_header* header);
/* Collective, on host tensors: a reduce-scatter (Aggregator::ReduceScatterGradients). On return this rank's shard of
 * the tensors' elements, end to end from *shard_begin for *shard_count elements, holds the aggregate; the rest keeps
 * this rank's input. Not on a shard aggregator. (Since version 5.) */
GRADAGG_C_EXPORT gradagg_status gradagg_reduce_scatter(gradagg_aggregator* aggregator, const gradagg_tensor* tensors,
                                                       size_t count, gradagg_header* header, size_t* shard_begin,
                                                       size_t* shard_count);
/* Collective, on GPUs: the work is queued on `stream` (a cudaStream_t; NULL the legacy default stream) and the call
 * returns once the result is in place. */
GRADAGG_C_EXPORT gradagg_status gradagg_aggregate_device(gradagg_aggregator* aggregator, const gradagg_tensor* tensors,
                                                         size_t count, void* stream, gradagg_header* header);
/* Collective, in the background: returns at once with *pending; leave tensors and header alone until
 * gradagg_wait(*pending) returns. The tensor list itself is copied. */
GRADAGG_C_EXPORT gradagg_status gradagg_aggregate_async(gradagg_aggregator* aggregator, const gradagg_tensor* tensors,
                                                        size_t count, gradagg_header* header,
                                                        gradagg_pending** pending);
GRADAGG_C_EXPORT gradagg_status gradagg_aggregate_device_async(gradagg_aggregator* aggregator,
                                                               const gradagg_tensor* tensors, size_t count,
                                                               void* stream, gradagg_header* header,
                                                               gradagg_pending** pending);
/* Waits for the call, writes the summed header back, frees `pending` (even on failure) and returns the call's
 * status. */
GRADAGG_C_EXPORT gradagg_status gradagg_wait(gradagg_pending* pending);
/* *done = 1 once gradagg_wait would not block. */
GRADAGG_C_EXPORT gradagg_status gradagg_done(gradagg_pending* pending, int* done);

/* Collective, on GPUs: see Aggregator::RegisterDeviceBuffer. */
GRADAGG_C_EXPORT gradagg_status gradagg_register_device_buffer(gradagg_aggregator* aggregator, void* data,
                                                               size_t bytes);
GRADAGG_C_EXPORT gradagg_status gradagg_deregister_device_buffer(gradagg_aggregator* aggregator, void* data);

/* Local: forget the carried quantization error. */
GRADAGG_C_EXPORT gradagg_status gradagg_reset_residuals(gradagg_aggregator* aggregator);
/* Local, for checkpoints (Aggregator::ExportResiduals): the carried quantization error after the last call. First
 * the sizes (any pointer may be NULL), then the values into arrays of those sizes: the last call's tensor sizes, r1
 * over this rank's stripe, r2 over the sub-stripe it owns. (Since version 4.) */
GRADAGG_C_EXPORT gradagg_status gradagg_residual_sizes(gradagg_aggregator* aggregator, size_t* tensor_count,
                                                       size_t* stripe_count, size_t* own_count);
GRADAGG_C_EXPORT gradagg_status gradagg_export_residuals(gradagg_aggregator* aggregator, size_t* tensor_sizes,
                                                         float* stripe, float* own);
/* Local (Aggregator::ImportResiduals): the next call, which must have these tensor sizes, starts from these
 * residuals; GRADAGG_ERROR_USAGE when they cannot be this rank's. (Since version 4.) */
GRADAGG_C_EXPORT gradagg_status gradagg_import_residuals(gradagg_aggregator* aggregator, const size_t* tensor_sizes,
                                                         size_t tensor_count, const float* stripe, size_t stripe_count,
                                                         const float* own, size_t own_count);
GRADAGG_C_EXPORT gradagg_status gradagg_last_stats(const gradagg_aggregator* aggregator, gradagg_stats* stats);
/* Where this rank sits: any pointer may be NULL. */
GRADAGG_C_EXPORT gradagg_status gradagg_topology(const gradagg_aggregator* aggregator, int* rank, int* size, int* nodes,
                                                 int* ranks_per_node);
/* This rank's node (0 .. nodes - 1, the same on every rank of a node) and its index inside the node: any pointer
 * may be NULL. (Since version 6.) */
GRADAGG_C_EXPORT gradagg_status gradagg_placement(const gradagg_aggregator* aggregator, int* node, int* local_rank);
/* One line: the effective options (gradagg/options.h's Describe). Valid until this thread's next gradagg call. */
GRADAGG_C_EXPORT const char* gradagg_describe(const gradagg_aggregator* aggregator);

#ifdef __cplusplus
}
#endif

#endif /* GRADAGG_GRADAGG_C_H_ */

// gradagg_c.h over the C++ Aggregator: every call catches what the C++ API throws and turns it into a status and a
// message for gradagg_last_error.
#include <mpi.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "gradagg/errors.h"
#include "gradagg/gradagg_c.h"
#include "gradagg/shard_aggregator.h"
#include "mpi/mpi_error.h"

// An Aggregator, or a ShardAggregator (gradagg_create_shard) whose calls sum the shard across the nodes; `aggregator`
// is the one that answers for stats, residuals and topology either way.
struct gradagg_aggregator {
  gradagg_aggregator(MPI_Comm comm, const gradagg::AggregatorOptions& options)
      : own(std::make_unique<gradagg::Aggregator>(comm, options)), aggregator(*own) {}
  explicit gradagg_aggregator(std::unique_ptr<gradagg::ShardAggregator> shards)
      : shard(std::move(shards)), aggregator(shard->acrossNodes()) {}
  std::unique_ptr<gradagg::Aggregator> own;
  std::unique_ptr<gradagg::ShardAggregator> shard;
  gradagg::Aggregator& aggregator;
};

struct gradagg_pending {
  gradagg::PendingAggregation call;
  gradagg::GradientHeader header;  // what the background call sums, copied back by gradagg_wait
  gradagg_header* target = nullptr;
};

namespace {

using gradagg::UsageError;

std::string& LastError() {
  thread_local std::string message;
  return message;
}

std::string& DescribeText() {
  thread_local std::string text;
  return text;
}

// Runs `work`, mapping what it throws to a status and LastError.
template <typename Work>
gradagg_status Guarded(Work work) {
  try {
    work();
    LastError().clear();
    return GRADAGG_OK;
  } catch (const gradagg::UsageError& error) {
    LastError() = error.what();
    return GRADAGG_ERROR_USAGE;
  } catch (const gradagg::TimeoutError& error) {
    LastError() = error.what();
    return GRADAGG_ERROR_TIMEOUT;
  } catch (const std::exception& error) {
    LastError() = error.what();
    return GRADAGG_ERROR_RUNTIME;
  } catch (...) {
    LastError() = "gradagg: an unknown error";
    return GRADAGG_ERROR_RUNTIME;
  }
}

template <typename T>
T& Require(T* pointer, const char* what, const char* call) {
  if (pointer == nullptr) throw UsageError(std::string(call) + ": " + what + " is NULL");
  return *pointer;
}

// `from` into `to`, and `count` values from `from`: the pointers may be null only where nothing is copied.
template <typename T>
void CopyOut(const std::vector<T>& from, T* to, const char* what, const char* call) {
  if (!from.empty()) std::copy(from.begin(), from.end(), &Require(to, what, call));
}

template <typename T>
std::vector<T> CopyIn(const T* from, size_t count, const char* what, const char* call) {
  if (count == 0) return {};
  const T* begin = &Require(from, what, call);
  return std::vector<T>(begin, begin + count);
}

// The Aggregator of a handle for a call that a shard aggregator does not offer.
gradagg::Aggregator& Unsharded(gradagg_aggregator* aggregator, const char* call) {
  gradagg_aggregator& self = Require(aggregator, "aggregator", call);
  if (self.shard) {
    throw UsageError(std::string(call) + ": not on a shard aggregator (gradagg_create_shard), whose calls are "
                     "gradagg_aggregate and gradagg_aggregate_device");
  }
  return self.aggregator;
}

bool Flag(int value, const char* field) {
  if (value != 0 && value != 1) throw UsageError(std::string("gradagg_options.") + field + " must be 0 or 1");
  return value == 1;
}

gradagg::AggregatorOptions FromC(const gradagg_options& c) {
  gradagg::AggregatorOptions options;
  options.bits = c.bits;
  options.bucketSize = c.bucket_size;
  options.errorFeedback = Flag(c.error_feedback, "error_feedback");
  options.meanThreshold = Flag(c.mean_threshold, "mean_threshold");
  options.quantizeOwnStripe = Flag(c.quantize_own_stripe, "quantize_own_stripe");
  options.ranksPerNode = c.ranks_per_node;
  switch (c.cuda_aware_mpi) {
    case -1:
      options.transport = gradagg::MpiTransport::kAuto;
      break;
    case 0:
      options.transport = gradagg::MpiTransport::kStaged;
      break;
    case 1:
      options.transport = gradagg::MpiTransport::kCudaAware;
      break;
    default:
      throw UsageError("gradagg_options.cuda_aware_mpi must be -1 (auto), 0 (staged) or 1 (CUDA-aware)");
  }
  options.stagingChunkBytes = c.staging_chunk_bytes;
  options.doubleBuffered = Flag(c.double_buffered, "double_buffered");
  options.timeoutSeconds = c.timeout_seconds;
  options.timing = Flag(c.timing, "timing");
  options.traceLevel = c.trace_level;
  options.pieceBytes = c.piece_bytes;
  return options;
}

gradagg_options ToC(const gradagg::AggregatorOptions& options) {
  gradagg_options c{};
  c.bits = options.bits;
  c.bucket_size = options.bucketSize;
  c.error_feedback = options.errorFeedback ? 1 : 0;
  c.mean_threshold = options.meanThreshold ? 1 : 0;
  c.quantize_own_stripe = options.quantizeOwnStripe ? 1 : 0;
  c.ranks_per_node = options.ranksPerNode;
  c.cuda_aware_mpi = options.transport == gradagg::MpiTransport::kAuto        ? -1
                     : options.transport == gradagg::MpiTransport::kCudaAware ? 1
                                                                              : 0;
  c.staging_chunk_bytes = options.stagingChunkBytes;
  c.double_buffered = options.doubleBuffered ? 1 : 0;
  c.timeout_seconds = options.timeoutSeconds;
  c.timing = options.timing ? 1 : 0;
  c.trace_level = options.traceLevel;
  c.piece_bytes = options.pieceBytes;
  return c;
}

// The tensors as the C++ API takes them. The element type is checked on this rank only (a program passes the same
// types on every rank); sizes and pointers are checked by the C++ API on every rank together.
std::vector<gradagg::GradientBuffer> HostTensors(const gradagg_tensor* tensors, size_t count, const char* call) {
  if (tensors == nullptr && count > 0) throw UsageError(std::string(call) + ": tensors is NULL");
  std::vector<gradagg::GradientBuffer> buffers;
  for (size_t i = 0; i < count; ++i) {
    if (tensors[i].type != GRADAGG_FLOAT32) {
      throw UsageError(std::string(call) + ": tensor " + std::to_string(i) + " is not float32; host tensors must be (" +
                       gradagg::RankAndHost() + ")");
    }
    buffers.push_back({static_cast<float*>(tensors[i].data), tensors[i].count});
  }
  return buffers;
}

std::vector<gradagg::DeviceGradient> DeviceTensors(const gradagg_tensor* tensors, size_t count, const char* call) {
  if (tensors == nullptr && count > 0) throw UsageError(std::string(call) + ": tensors is NULL");
  std::vector<gradagg::DeviceGradient> gradients;
  for (size_t i = 0; i < count; ++i) {
    gradagg::DataType type = gradagg::DataType::kFloat32;
    switch (tensors[i].type) {
      case GRADAGG_FLOAT32:
        type = gradagg::DataType::kFloat32;
        break;
      case GRADAGG_BFLOAT16:
        type = gradagg::DataType::kBFloat16;
        break;
      case GRADAGG_FLOAT16:
        type = gradagg::DataType::kFloat16;
        break;
      default:
        throw UsageError(std::string(call) + ": tensor " + std::to_string(i) + " has element type " +
                         std::to_string(tensors[i].type) + ", not a gradagg_element_type (" + gradagg::RankAndHost() +
                         ")");
    }
    gradients.push_back({tensors[i].data, tensors[i].count, type});
  }
  return gradients;
}

gradagg::GradientHeader HeaderFromC(const gradagg_header& c) {
  gradagg::GradientHeader header;
  header.numSamples = c.num_samples;
  header.numSamplesWithLabel = c.num_samples_with_label;
  header.criterion = c.criterion;
  if (c.eval_error_count > 0 && (c.eval_error_sums == nullptr || c.eval_error_samples == nullptr))
    throw UsageError("gradagg_header: eval_error_count > 0 but an eval_error array is NULL");
  for (size_t i = 0; i < c.eval_error_count; ++i) {
    header.evalErrors.push_back({c.eval_error_sums[i], c.eval_error_samples[i]});
  }
  return header;
}

void HeaderToC(const gradagg::GradientHeader& header, gradagg_header& c) {
  c.num_samples = header.numSamples;
  c.num_samples_with_label = header.numSamplesWithLabel;
  c.criterion = header.criterion;
  for (size_t i = 0; i < c.eval_error_count && i < header.evalErrors.size(); ++i) {
    c.eval_error_sums[i] = header.evalErrors[i].errorSum;
    c.eval_error_samples[i] = header.evalErrors[i].numSamples;
  }
}

// Runs a blocking call with the C header converted in and out.
template <typename Call>
void WithHeader(gradagg_header* header, Call call) {
  if (header == nullptr) {
    call(nullptr);
    return;
  }
  gradagg::GradientHeader summed = HeaderFromC(*header);
  call(&summed);
  HeaderToC(summed, *header);
}

template <typename Start>
void StartPending(gradagg_header* header, gradagg_pending** pending, const char* name, Start start) {
  Require(pending, "pending", name);
  auto call = std::make_unique<gradagg_pending>();
  if (header != nullptr) {
    call->header = HeaderFromC(*header);
    call->target = header;
  }
  call->call = start(header != nullptr ? &call->header : nullptr);
  *pending = call.release();
}

bool weInitializedMpi = false;

// What gradagg_create and gradagg_create_shard check first: MPI is up and the communicator exists.
MPI_Comm CommunicatorOf(int64_t fortran_comm, const char* call) {
  int initialized = 0;
  GRADAGG_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized == 0) {
    throw UsageError(std::string(call) +
                     ": MPI is not initialised (call MPI_Init, gradagg_mpi_init, or import mpi4py)");
  }
  const MPI_Comm comm =
      fortran_comm == GRADAGG_COMM_WORLD ? MPI_COMM_WORLD : MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm));
  if (comm == MPI_COMM_NULL) throw UsageError(std::string(call) + ": the communicator is MPI_COMM_NULL");
  return comm;
}

gradagg::AggregatorOptions SettingsOf(const gradagg_options* options) {
  return options != nullptr ? FromC(*options) : gradagg::ApplyEnvironment(gradagg::AggregatorOptions());
}

}  // namespace

extern "C" {

const char* gradagg_last_error(void) { return LastError().c_str(); }

gradagg_status gradagg_mpi_init(int* provided) {
  return Guarded([&] {
    int initialized = 0;
    GRADAGG_MPI_CHECK(MPI_Initialized(&initialized));
    int level = MPI_THREAD_SINGLE;
    if (initialized == 0) {
      GRADAGG_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &level));
      weInitializedMpi = true;
    } else {
      GRADAGG_MPI_CHECK(MPI_Query_thread(&level));
    }
    if (provided != nullptr) *provided = level;
  });
}

gradagg_status gradagg_mpi_finalize(void) {
  return Guarded([] {
    int finalized = 0;
    GRADAGG_MPI_CHECK(MPI_Finalized(&finalized));
    if (weInitializedMpi && finalized == 0) GRADAGG_MPI_CHECK(MPI_Finalize());
    weInitializedMpi = false;
  });
}

gradagg_status gradagg_world(int* rank, int* size) {
  return Guarded([&] {
    int initialized = 0;
    int finalized = 0;
    GRADAGG_MPI_CHECK(MPI_Initialized(&initialized));
    GRADAGG_MPI_CHECK(MPI_Finalized(&finalized));
    if (initialized == 0 || finalized != 0) {
      throw gradagg::UsageError("gradagg_world: MPI is not initialised (call gradagg_mpi_init first) or finalised");
    }
    if (rank != nullptr) GRADAGG_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    if (size != nullptr) GRADAGG_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, size));
  });
}

gradagg_status gradagg_mpi_abort(int code) {
  return Guarded([&] {
    int initialized = 0;
    int finalized = 0;
    GRADAGG_MPI_CHECK(MPI_Initialized(&initialized));
    GRADAGG_MPI_CHECK(MPI_Finalized(&finalized));
    if (initialized == 0 || finalized != 0) throw UsageError("gradagg_mpi_abort: MPI is not running");
    GRADAGG_MPI_CHECK(MPI_Abort(MPI_COMM_WORLD, code));
  });
}

gradagg_status gradagg_options_init(gradagg_options* options) {
  return Guarded([&] {
    Require(options, "options", "gradagg_options_init") = ToC(gradagg::ApplyEnvironment(gradagg::AggregatorOptions()));
  });
}

gradagg_status gradagg_create(int64_t fortran_comm, const gradagg_options* options, gradagg_aggregator** aggregator) {
  return Guarded([&] {
    Require(aggregator, "aggregator", "gradagg_create") = nullptr;
    const MPI_Comm comm = CommunicatorOf(fortran_comm, "gradagg_create");
    *aggregator = new gradagg_aggregator(comm, SettingsOf(options));
  });
}

gradagg_status gradagg_create_shard(int64_t fortran_comm, const gradagg_options* options,
                                    gradagg_aggregator** aggregator) {
  return Guarded([&] {
    Require(aggregator, "aggregator", "gradagg_create_shard") = nullptr;
    const MPI_Comm comm = CommunicatorOf(fortran_comm, "gradagg_create_shard");
    *aggregator = new gradagg_aggregator(std::make_unique<gradagg::ShardAggregator>(comm, SettingsOf(options)));
  });
}

gradagg_status gradagg_destroy(gradagg_aggregator* aggregator) {
  return Guarded([&] {
    int finalized = 0;
    GRADAGG_MPI_CHECK(MPI_Finalized(&finalized));
    // After MPI_Finalize its communicators are gone with it, and freeing them would fail: nothing is freed then.
    if (finalized == 0) delete aggregator;
  });
}

gradagg_status gradagg_aggregate(gradagg_aggregator* aggregator, const gradagg_tensor* tensors, size_t count,
                                 gradagg_header* header) {
  return Guarded([&] {
    gradagg_aggregator& self = Require(aggregator, "aggregator", "gradagg_aggregate");
    const std::vector<gradagg::GradientBuffer> buffers = HostTensors(tensors, count, "gradagg_aggregate");
    WithHeader(header, [&](gradagg::GradientHeader* summed) {
      if (self.shard) return self.shard->AggregateShard(buffers, summed);
      self.aggregator.AggregateGradients(buffers, summed);
    });
  });
}

gradagg_status gradagg_reduce_scatter(gradagg_aggregator* aggregator, const gradagg_tensor* tensors, size_t count,
                                      gradagg_header* header, size_t* shard_begin, size_t* shard_count) {
  return Guarded([&] {
    gradagg::Aggregator& self = Unsharded(aggregator, "gradagg_reduce_scatter");
    size_t& begin = Require(shard_begin, "shard_begin", "gradagg_reduce_scatter");
    size_t& elements = Require(shard_count, "shard_count", "gradagg_reduce_scatter");
    const std::vector<gradagg::GradientBuffer> buffers = HostTensors(tensors, count, "gradagg_reduce_scatter");
    WithHeader(header, [&](gradagg::GradientHeader* summed) {
      const gradagg::ShardRange shard = self.ReduceScatterGradients(buffers, summed);
      begin = shard.begin;
      elements = shard.count;
    });
  });
}

gradagg_status gradagg_aggregate_device(gradagg_aggregator* aggregator, const gradagg_tensor* tensors, size_t count,
                                        void* stream, gradagg_header* header) {
  return Guarded([&] {
    gradagg_aggregator& self = Require(aggregator, "aggregator", "gradagg_aggregate_device");
    const std::vector<gradagg::DeviceGradient> gradients = DeviceTensors(tensors, count, "gradagg_aggregate_device");
    const auto cudaStream = static_cast<gradagg::CudaStream>(stream);
    WithHeader(header, [&](gradagg::GradientHeader* summed) {
      if (self.shard) return self.shard->AggregateShard(gradients, cudaStream, summed);
      self.aggregator.AggregateGradients(gradients, cudaStream, summed);
    });
  });
}

gradagg_status gradagg_aggregate_async(gradagg_aggregator* aggregator, const gradagg_tensor* tensors, size_t count,
                                       gradagg_header* header, gradagg_pending** pending) {
  return Guarded([&] {
    gradagg::Aggregator& self = Unsharded(aggregator, "gradagg_aggregate_async");
    const std::vector<gradagg::GradientBuffer> buffers = HostTensors(tensors, count, "gradagg_aggregate_async");
    StartPending(header, pending, "gradagg_aggregate_async",
                 [&](gradagg::GradientHeader* summed) { return self.AggregateGradientsAsync(buffers, summed); });
  });
}

gradagg_status gradagg_aggregate_device_async(gradagg_aggregator* aggregator, const gradagg_tensor* tensors,
                                              size_t count, void* stream, gradagg_header* header,
                                              gradagg_pending** pending) {
  return Guarded([&] {
    gradagg::Aggregator& self = Unsharded(aggregator, "gradagg_aggregate_device_async");
    const std::vector<gradagg::DeviceGradient> gradients =
        DeviceTensors(tensors, count, "gradagg_aggregate_device_async");
    StartPending(header, pending, "gradagg_aggregate_device_async", [&](gradagg::GradientHeader* summed) {
      return self.AggregateGradientsAsync(gradients, static_cast<gradagg::CudaStream>(stream), summed);
    });
  });
}

gradagg_status gradagg_wait(gradagg_pending* pending) {
  const std::unique_ptr<gradagg_pending> owned(pending);  // freed whatever happens
  return Guarded([&] {
    gradagg_pending& call = Require(pending, "pending", "gradagg_wait");
    call.call.Wait();
    if (call.target != nullptr) HeaderToC(call.header, *call.target);
  });
}

gradagg_status gradagg_done(gradagg_pending* pending, int* done) {
  return Guarded(
      [&] { Require(done, "done", "gradagg_done") = Require(pending, "pending", "gradagg_done").call.Done(); });
}

gradagg_status gradagg_register_device_buffer(gradagg_aggregator* aggregator, void* data, size_t bytes) {
  return Guarded([&] {
    Require(aggregator, "aggregator", "gradagg_register_device_buffer").aggregator.RegisterDeviceBuffer(data, bytes);
  });
}

gradagg_status gradagg_deregister_device_buffer(gradagg_aggregator* aggregator, void* data) {
  return Guarded([&] {
    Require(aggregator, "aggregator", "gradagg_deregister_device_buffer").aggregator.DeregisterDeviceBuffer(data);
  });
}

gradagg_status gradagg_reset_residuals(gradagg_aggregator* aggregator) {
  return Guarded([&] { Require(aggregator, "aggregator", "gradagg_reset_residuals").aggregator.ResetResiduals(); });
}

gradagg_status gradagg_residual_sizes(gradagg_aggregator* aggregator, size_t* tensor_count, size_t* stripe_count,
                                      size_t* own_count) {
  return Guarded([&] {
    const gradagg::Residuals residuals =
        Require(aggregator, "aggregator", "gradagg_residual_sizes").aggregator.ExportResiduals();
    if (tensor_count != nullptr) *tensor_count = residuals.tensorSizes.size();
    if (stripe_count != nullptr) *stripe_count = residuals.stripe.size();
    if (own_count != nullptr) *own_count = residuals.own.size();
  });
}

gradagg_status gradagg_export_residuals(gradagg_aggregator* aggregator, size_t* tensor_sizes, float* stripe,
                                        float* own) {
  constexpr const char* kCall = "gradagg_export_residuals";
  return Guarded([&] {
    const gradagg::Residuals residuals = Require(aggregator, "aggregator", kCall).aggregator.ExportResiduals();
    CopyOut(residuals.tensorSizes, tensor_sizes, "tensor_sizes", kCall);
    CopyOut(residuals.stripe, stripe, "stripe", kCall);
    CopyOut(residuals.own, own, "own", kCall);
  });
}

gradagg_status gradagg_import_residuals(gradagg_aggregator* aggregator, const size_t* tensor_sizes, size_t tensor_count,
                                        const float* stripe, size_t stripe_count, const float* own, size_t own_count) {
  constexpr const char* kCall = "gradagg_import_residuals";
  return Guarded([&] {
    gradagg::Aggregator& self = Require(aggregator, "aggregator", kCall).aggregator;
    self.ImportResiduals({CopyIn(tensor_sizes, tensor_count, "tensor_sizes", kCall),
                          CopyIn(stripe, stripe_count, "stripe", kCall), CopyIn(own, own_count, "own", kCall)});
  });
}

gradagg_status gradagg_last_stats(const gradagg_aggregator* aggregator, gradagg_stats* stats) {
  return Guarded([&] {
    const gradagg::AggregationStats& last =
        Require(aggregator, "aggregator", "gradagg_last_stats").aggregator.LastStats();
    gradagg_stats& out = Require(stats, "stats", "gradagg_last_stats");
    out.agreement = last.times.agreement;
    out.reduce_scatter = last.times.reduceScatter;
    out.quantize = last.times.quantize;
    out.exchange = last.times.exchange;
    out.decode = last.times.decode;
    out.all_gather = last.times.allGather;
    out.total = last.times.total;
    out.inter_node_bytes_sent = last.interNodeBytesSent;
    out.inter_node_float_bytes = last.interNodeFloatBytes;
    out.non_finite_buckets = last.nonFiniteBuckets;
    out.in_place = last.inPlace ? 1 : 0;
  });
}

gradagg_status gradagg_topology(const gradagg_aggregator* aggregator, int* rank, int* size, int* nodes,
                                int* ranks_per_node) {
  return Guarded([&] {
    const gradagg::Aggregator& self = Require(aggregator, "aggregator", "gradagg_topology").aggregator;
    if (rank != nullptr) *rank = self.rank();
    if (size != nullptr) *size = self.size();
    if (nodes != nullptr) *nodes = self.nodeCount();
    if (ranks_per_node != nullptr) *ranks_per_node = self.ranksPerNode();
  });
}

gradagg_status gradagg_placement(const gradagg_aggregator* aggregator, int* node, int* local_rank) {
  return Guarded([&] {
    const gradagg::Aggregator& self = Require(aggregator, "aggregator", "gradagg_placement").aggregator;
    if (node != nullptr) *node = self.nodeIndex();
    if (local_rank != nullptr) *local_rank = self.localRank();
  });
}

const char* gradagg_describe(const gradagg_aggregator* aggregator) {
  const gradagg_status status = Guarded([&] {
    DescribeText() = gradagg::Describe(Require(aggregator, "aggregator", "gradagg_describe").aggregator.options());
  });
  return status == GRADAGG_OK ? DescribeText().c_str() : "";
}

}  // extern "C"

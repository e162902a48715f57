#include "apps/gradagg/cli_options.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <sstream>

#include "gradagg/errors.h"

namespace gradagg::cli {
namespace po = boost::program_options;

std::string FormatDevice(Device device) {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
    case Device::kAuto:
      break;
  }
  return "auto";
}

namespace {

po::options_description Describe() {
  po::options_description options(
      "gradagg: sum gradients across MPI ranks (intra-node shared memory, 1-bit-SGD exchange across nodes),\n"
      "benchmark it and check it against a serial simulation.\n\n"
      "Usage: mpirun -np N gradagg [options]\n\nOptions");
  // clang-format off
  options.add_options()
      ("help,h", "print this help and exit")
      ("info", "print how gradagg was built and what it finds at run time, and exit")
      ("device", po::value<std::string>(), "cpu | cuda | auto (default auto: cuda when every rank has a GPU and the build has CUDA, else cpu)")
      ("minbytes,b", po::value<std::string>(), "smallest gradient size in bytes, K/M/G suffixes (default 1M)")
      ("maxbytes,e", po::value<std::string>(), "largest gradient size in bytes (default 16M)")
      ("stepfactor,f", po::value<uint64_t>(), "multiply the size by this between runs, >= 2 (default 2)")
      ("size", po::value<std::string>(), "one size only: sets -b and -e")
      ("iters,n", po::value<int>(), "timed iterations per size (default 20)")
      ("warmup_iters,w", po::value<int>(), "untimed warm-up iterations per size (default 5)")
      ("check,c", "check every size against the serial simulation, bitwise, on every rank")
      ("no-baseline", "skip timing MPI_Allreduce of the same gradient beside gradagg")
      ("no-nccl", "GPU runs: skip timing ncclAllReduce beside gradagg")
      ("no-phase-times", "time whole calls only, as a trainer runs them: no per-phase timing, whose events and "
                         "waits add to each call (the phase columns read 0)")
      ("no-register", "GPU runs: leave the gradient buffer unregistered (RegisterDeviceBuffer), so calls copy it "
                      "into the Aggregator's own buffer and back")
      ("seed", po::value<uint64_t>(), "seed of the synthetic gradients (default 42)")
      ("tensors", po::value<std::string>(),
       "tensor lengths in elements, comma-separated, repeated to cover each gradient (e.g. 2,5010,6); buckets "
       "restart at every tensor (default: one tensor)")
      ("json", po::value<std::string>(), "also write all results to this JSON file")
      ("bits", po::value<int>(), "bits per element across nodes: 1, 2, 4, 8 or 32 (default 1; GRADAGG_BITS)")
      ("bucket", po::value<uint64_t>(), "elements per quantization bucket (default 512; GRADAGG_BUCKET)")
      ("ranks-per-node", po::value<int>(),
       "emulate nodes of this many consecutive ranks; 0 = one node per host (default 0; GRADAGG_RANKS_PER_NODE)")
      ("mean-threshold", "1-bit threshold at the bucket mean instead of zero (GRADAGG_MEAN_THRESHOLD)")
      ("no-error-feedback", "drop quantization error instead of carrying it over (GRADAGG_ERROR_FEEDBACK=off)")
      ("no-quantize-own-stripe", "an owner adds its own part exactly (GRADAGG_QUANTIZE_OWN_STRIPE=off)")
      ("cuda-aware-mpi", po::value<std::string>(),
       "GPU runs: auto | on | off: pass device buffers to MPI (on), stage through pinned host memory (off), or ask "
       "MPI (default auto; GRADAGG_CUDA_AWARE_MPI)")
      ("staging-chunk", po::value<std::string>(),
       "GPU runs, staged transport: pipeline chunk size, K/M suffixes (default 4M; GRADAGG_STAGING_CHUNK)")
      ("piece", po::value<std::string>(),
       "phase 2 quantizes, sends, sums and re-quantizes each node's part in pieces of about this many bytes of "
       "codes, K/M suffixes; 0 = one piece (default 1M; GRADAGG_PIECE)")
      ("trace", po::value<int>(), "0 quiet, 1 configuration, 2 per-call phase times, 3 also each call's timeline of steps, on stderr (GRADAGG_TRACE)");
  // clang-format on
  return options;
}

std::vector<size_t> ParseTensorList(const std::string& text) {
  std::vector<size_t> lengths;
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const bool digits = !item.empty() && item.size() <= 12 &&
                        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoull(item) == 0)
      throw UsageError("--tensors " + text + ": '" + item + "' is not a tensor length (a whole number above 0)");
    lengths.push_back(static_cast<size_t>(std::stoull(item)));
  }
  if (lengths.empty()) throw UsageError("--tensors needs at least one length, e.g. --tensors 2,5010,6");
  return lengths;
}

uint64_t RequireSize(const po::variables_map& values, const char* name) {
  const std::string text = values[name].as<std::string>();
  const std::optional<uint64_t> bytes = ParseByteSize(text);
  if (!bytes) throw UsageError("--" + std::string(name) + " " + text + " is not a size (e.g. 4096, 64K, 16M, 1G)");
  if (*bytes % sizeof(float) != 0) {
    throw UsageError("--" + std::string(name) + " " + text + " is not a whole number of float32 elements (4 bytes)");
  }
  return *bytes;
}

void Apply(const po::variables_map& values, CliOptions& cli) {
  if (values.count("device")) {
    const std::string device = values["device"].as<std::string>();
    if (device == "cpu") {
      cli.device = Device::kCpu;
    } else if (device == "cuda") {
      cli.device = Device::kCuda;
    } else if (device == "auto") {
      cli.device = Device::kAuto;
    } else {
      throw UsageError("--device must be cpu, cuda or auto, not '" + device + "'");
    }
  }
  if (values.count("size")) cli.minBytes = cli.maxBytes = RequireSize(values, "size");
  if (values.count("minbytes")) cli.minBytes = RequireSize(values, "minbytes");
  if (values.count("maxbytes")) cli.maxBytes = RequireSize(values, "maxbytes");
  if (values.count("stepfactor")) cli.stepFactor = values["stepfactor"].as<uint64_t>();
  if (values.count("iters")) cli.iterations = values["iters"].as<int>();
  if (values.count("warmup_iters")) cli.warmups = values["warmup_iters"].as<int>();
  if (values.count("seed")) cli.seed = values["seed"].as<uint64_t>();
  if (values.count("json")) cli.jsonPath = values["json"].as<std::string>();
  if (values.count("tensors")) cli.tensors = ParseTensorList(values["tensors"].as<std::string>());
  cli.check = values.count("check") > 0;
  cli.mpiBaseline = values.count("no-baseline") == 0;
  cli.ncclBaseline = values.count("no-nccl") == 0;
  cli.registerBuffer = values.count("no-register") == 0;
  cli.info = values.count("info") > 0;

  AggregatorOptions& options = cli.aggregator;
  options = ApplyEnvironment(options);
  options.timing = values.count("no-phase-times") == 0;
  if (values.count("bits")) options.bits = values["bits"].as<int>();
  if (values.count("bucket")) options.bucketSize = values["bucket"].as<uint64_t>();
  if (values.count("ranks-per-node")) options.ranksPerNode = values["ranks-per-node"].as<int>();
  if (values.count("mean-threshold")) options.meanThreshold = true;
  if (values.count("no-error-feedback")) options.errorFeedback = false;
  if (values.count("no-quantize-own-stripe")) options.quantizeOwnStripe = false;
  if (values.count("cuda-aware-mpi")) {
    const std::string mode = values["cuda-aware-mpi"].as<std::string>();
    if (mode == "auto") {
      options.transport = MpiTransport::kAuto;
    } else if (mode == "on") {
      options.transport = MpiTransport::kCudaAware;
    } else if (mode == "off") {
      options.transport = MpiTransport::kStaged;
    } else {
      throw UsageError("--cuda-aware-mpi must be auto, on or off, not '" + mode + "'");
    }
  }
  if (values.count("staging-chunk")) {
    const std::string text = values["staging-chunk"].as<std::string>();
    const std::optional<uint64_t> bytes = ParseByteSize(text);
    if (!bytes) throw UsageError("--staging-chunk " + text + " is not a size (e.g. 64K, 4M)");
    options.stagingChunkBytes = *bytes;
  }
  if (values.count("piece")) {
    const std::string text = values["piece"].as<std::string>();
    const std::optional<uint64_t> bytes = ParseByteSize(text);
    if (!bytes) throw UsageError("--piece " + text + " is not a size (e.g. 0, 256K, 1M)");
    options.pieceBytes = *bytes;
  }
  if (values.count("trace")) options.traceLevel = values["trace"].as<int>();

  if (cli.minBytes > cli.maxBytes) throw UsageError("--minbytes is larger than --maxbytes");
  if (cli.minBytes == 0 && cli.maxBytes > 0)
    throw UsageError(
        "--minbytes 0 would measure size 0 only (each size is a multiple of the last): start at 4 or more");
  if (cli.stepFactor < 2) throw UsageError("--stepfactor must be at least 2");
  if (cli.iterations < 1) throw UsageError("--iters must be at least 1");
  if (cli.warmups < 0) throw UsageError("--warmup_iters must not be negative");
  if (options.doubleBuffered)
    throw UsageError(
        "GRADAGG_DOUBLE_BUFFERED is for trainers: gradagg times and checks calls that return their own "
        "aggregate; unset it");
  Validate(options);
}

}  // namespace

std::vector<size_t> TensorLengths(const std::vector<size_t>& pattern, size_t count) {
  if (pattern.empty()) return {count};
  std::vector<size_t> lengths;
  for (size_t covered = 0, i = 0; covered < count; i = (i + 1) % pattern.size()) {
    lengths.push_back(std::min(pattern[i], count - covered));
    covered += lengths.back();
  }
  return lengths;
}

ParseResult ParseCommandLine(int argc, const char* const* argv) {
  ParseResult result;
  const po::options_description description = Describe();
  std::ostringstream help;
  help << description;
  result.helpText = help.str();
  try {
    po::variables_map values;
    po::store(po::command_line_parser(argc, argv).options(description).run(), values);
    po::notify(values);
    if (values.count("help")) {
      result.showHelp = true;
      return result;
    }
    Apply(values, result.options);
  } catch (const std::exception& error) {  // Boost's parse errors and our UsageError alike
    result.error = error.what();
  }
  return result;
}

}  // namespace gradagg::cli

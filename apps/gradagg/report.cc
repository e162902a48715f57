#include "apps/gradagg/report.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace gradagg::cli {
namespace {

double Microseconds(double seconds) { return seconds * 1e6; }

double Compression(const SizeResult& row) {
  return row.wireBytes != 0 ? static_cast<double>(row.floatWireBytes) / static_cast<double>(row.wireBytes) : 0.0;
}

std::string Failure(const SizeResult& row) {
  if (row.wrong != 0) return std::to_string(row.wrong) + " elements differ from the serial simulation";
  if (!row.identical) return "ranks hold different results";
  if (!row.headerOk) return "the header sum is wrong";
  return "";
}

}  // namespace

double AlgorithmBandwidth(const SizeResult& row) {
  return row.seconds > 0.0 ? static_cast<double>(row.bytes) / row.seconds / 1e9 : 0.0;
}

double BusBandwidth(const SizeResult& row, int ranks) { return AlgorithmBandwidth(row) * 2.0 * (ranks - 1) / ranks; }

void PrintPreamble(const CliOptions& cli, const std::string& topology, int ranks, bool onGpu) {
  std::printf("# gradagg allreduce: %d ranks, %s\n", ranks, topology.c_str());
  std::printf("# device %s (%s); %s\n", onGpu ? "cuda" : "cpu", FormatDevice(cli.device).c_str(),
              Describe(cli.aggregator).c_str());
  std::printf("# sizes %llu .. %llu bytes x%llu; %d warm-up, %d timed iterations; seed %llu; check %s\n",
              static_cast<unsigned long long>(cli.minBytes), static_cast<unsigned long long>(cli.maxBytes),
              static_cast<unsigned long long>(cli.stepFactor), cli.warmups, cli.iterations,
              static_cast<unsigned long long>(cli.seed), cli.check ? "on" : "off");
  std::string tensors;
  for (size_t length : cli.tensors) tensors += (tensors.empty() ? "" : ",") + std::to_string(length);
  std::printf("# tensors: %s\n", tensors.empty() ? "one per gradient" : (tensors + " elements, repeated").c_str());
  std::printf("# time: mean over iterations of the slowest rank; phases: mean per call of the slowest rank (us)\n");
  std::printf("# mpi: MPI_Allreduce (float32, sum) of the same gradient, timed the same way; vs_mpi = mpi / time\n");
}

void PrintTableHeader() {
  std::printf("#\n# %10s %10s %5s %10s %8s %8s %12s %8s %8s %8s %8s %8s %8s %8s %10s %7s %10s %7s\n", "size", "count",
              "type", "time", "algbw", "busbw", "wire", "compress", "#wrong", "rs", "quant", "xchg", "decode", "ag",
              "mpi", "vs_mpi", "nccl", "vs_nccl");
  std::printf("# %10s %10s %5s %10s %8s %8s %12s %8s %8s %8s %8s %8s %8s %8s %10s %7s %10s %7s\n", "(B)", "(elements)",
              "", "(us)", "(GB/s)", "(GB/s)", "(B/rank)", "", "", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "",
              "(us)", "");
}

void PrintRow(const SizeResult& row, int ranks) {
  char wrong[32];
  if (row.checked) {
    std::snprintf(wrong, sizeof wrong, "%zu", row.wrong + (row.identical && row.headerOk ? 0 : 1));
  } else {
    std::snprintf(wrong, sizeof wrong, "N/A");
  }
  char mpi[32] = "N/A";
  char speedup[32] = "N/A";
  if (row.mpiSeconds > 0.0) {
    std::snprintf(mpi, sizeof mpi, "%.1f", Microseconds(row.mpiSeconds));
    std::snprintf(speedup, sizeof speedup, "%.2f", row.mpiSeconds / row.seconds);
  }
  char nccl[32] = "N/A";
  char ncclSpeedup[32] = "N/A";
  if (row.ncclSeconds > 0.0) {
    std::snprintf(nccl, sizeof nccl, "%.1f", Microseconds(row.ncclSeconds));
    std::snprintf(ncclSpeedup, sizeof ncclSpeedup, "%.2f", row.ncclSeconds / row.seconds);
  }
  std::printf("  %10zu %10zu %5s %10.1f %8.3f %8.3f %12zu %8.2f %8s %8.1f %8.1f %8.1f %8.1f %8.1f %10s %7s %10s %7s\n",
              row.bytes, row.count, "float", Microseconds(row.seconds), AlgorithmBandwidth(row),
              BusBandwidth(row, ranks), row.wireBytes, Compression(row), wrong, Microseconds(row.phases.reduceScatter),
              Microseconds(row.phases.quantize), Microseconds(row.phases.exchange), Microseconds(row.phases.decode),
              Microseconds(row.phases.allGather), mpi, speedup, nccl, ncclSpeedup);
  std::fflush(stdout);
}

std::string PrintSummary(const CliOptions& cli, const std::vector<SizeResult>& rows, int ranks) {
  double busbw = 0.0;
  for (const SizeResult& row : rows) busbw += BusBandwidth(row, ranks);
  std::printf("# Avg bus bandwidth    : %.3f GB/s\n", rows.empty() ? 0.0 : busbw / static_cast<double>(rows.size()));
  if (!cli.check) return "";
  std::string verdict = "PASS";
  double worstError = 0.0;
  for (const SizeResult& row : rows) {
    worstError = std::max(worstError, row.relativeError);
    const std::string failure = Failure(row);
    if (!failure.empty() && verdict == "PASS") verdict = "FAIL at " + std::to_string(row.bytes) + " bytes: " + failure;
  }
  std::printf("# relative error against the exact float64 sum: at most %.3e (from quantization; 0-1e-6 unquantized)\n",
              worstError);
  std::printf("# check: %s\n", verdict.c_str());
  return verdict;
}

void WriteJson(const std::string& path, const CliOptions& cli, const std::string& topology, int ranks,
               const std::vector<SizeResult>& rows, const std::string& verdict, bool onGpu) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write --json file '" + path + "'");
  const AggregatorOptions& o = cli.aggregator;
  out << "{\n  \"ranks\": " << ranks << ",\n  \"topology\": \"" << topology << "\",\n  \"device\": \""
      << (onGpu ? "cuda" : "cpu") << "\",\n  \"transport\": \"" << ToString(o.transport)
      << "\",\n  \"options\": {\"bits\": " << o.bits << ", \"bucket\": " << o.bucketSize
      << ", \"error_feedback\": " << (o.errorFeedback ? "true" : "false")
      << ", \"mean_threshold\": " << (o.meanThreshold ? "true" : "false")
      << ", \"quantize_own_stripe\": " << (o.quantizeOwnStripe ? "true" : "false")
      << ", \"ranks_per_node\": " << o.ranksPerNode << "},\n  \"iterations\": " << cli.iterations
      << ",\n  \"warmups\": " << cli.warmups
      << ",\n  \"check\": " << (cli.check ? "\"" + verdict + "\"" : std::string("null")) << ",\n  \"results\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SizeResult& r = rows[i];
    const PhaseTimes& p = r.phases;
    out << (i == 0 ? "\n" : ",\n") << "    {\"bytes\": " << r.bytes << ", \"count\": " << r.count
        << ", \"time_us\": " << Microseconds(r.seconds) << ", \"algbw_gbps\": " << AlgorithmBandwidth(r)
        << ", \"busbw_gbps\": " << BusBandwidth(r, ranks) << ", \"inter_node_bytes_per_rank\": " << r.wireBytes
        << ", \"inter_node_float_bytes_per_rank\": " << r.floatWireBytes
        << ", \"phases_us\": {\"agreement\": " << Microseconds(p.agreement)
        << ", \"reduce_scatter\": " << Microseconds(p.reduceScatter) << ", \"quantize\": " << Microseconds(p.quantize)
        << ", \"exchange\": " << Microseconds(p.exchange) << ", \"decode\": " << Microseconds(p.decode)
        << ", \"all_gather\": " << Microseconds(p.allGather) << "}";
    if (r.mpiSeconds > 0.0) out << ", \"mpi_allreduce_time_us\": " << Microseconds(r.mpiSeconds);
    if (r.ncclSeconds > 0.0) out << ", \"nccl_allreduce_time_us\": " << Microseconds(r.ncclSeconds);
    if (r.checked) {
      out << ", \"wrong\": " << r.wrong << ", \"identical\": " << (r.identical ? "true" : "false")
          << ", \"header_ok\": " << (r.headerOk ? "true" : "false") << ", \"relative_error\": " << r.relativeError;
    }
    out << "}";
  }
  out << "\n  ]\n}\n";
  if (!out) throw std::runtime_error("error while writing --json file '" + path + "'");
}

}  // namespace gradagg::cli

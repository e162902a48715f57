#include "aggregator/call_agreement.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gradagg/errors.h"
#include "mpi/agreement.h"
#include "mpi/deadline.h"
#include "mpi/mpi_error.h"
#include "mpi/roll_call.h"

namespace gradagg {
namespace {

// What every rank tells every other at the start of a call.
enum Field : size_t {
  kProblem,
  kElements,
  kTensors,
  kTensorSizes,
  kMemory,
  kHasHeader,
  kEvalCount,
  kSamples,
  kSamplesWithLabel,
  kCriterion,
  kFieldCount
};

uint64_t BitsOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

double DoubleOf(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// MPI_Allgather that gives up at the deadline and then names, through a roll call, the ranks that never came.
std::vector<uint64_t> AllGather(MPI_Comm world, const std::vector<uint64_t>& mine, int size, double timeoutSeconds) {
  std::vector<char> bytes(mine.size() * sizeof(uint64_t)), all;
  std::memcpy(bytes.data(), mine.data(), bytes.size());
  std::vector<int> absent;
  if (!AllGatherBytesBefore(world, bytes, timeoutSeconds, all, absent)) {
    throw TimeoutError("AggregateGradients: waited " + std::to_string(static_cast<int>(timeoutSeconds)) +
                       " s (GRADAGG_TIMEOUT) in the call agreement for " +
                       (absent.empty() ? std::string("ranks that came too late") : DescribeWorldRanks(world, absent)) +
                       ", which did not call AggregateGradients (stopped, or gone) (" + RankAndHost() + ")");
  }
  std::vector<uint64_t> records(mine.size() * static_cast<size_t>(size));
  std::memcpy(records.data(), all.data(), all.size());
  return records;
}

// Throws on every rank when some rank's `field` differs from rank 0's.
void RequireSame(const std::vector<uint64_t>& records, int size, Field field, const char* what, int myRank) {
  const uint64_t first = records[field];
  for (int rank = 1; rank < size; ++rank) {
    const uint64_t value = records[static_cast<size_t>(rank) * kFieldCount + field];
    if (value != first) {
      throw UsageError("AggregateGradients: ranks disagree on " + std::string(what) + ": rank 0 passes " +
                       std::to_string(first) + ", rank " + std::to_string(rank) + " passes " + std::to_string(value) +
                       "; every rank must pass the same (seen on rank " + std::to_string(myRank) + ")");
    }
  }
}

// FNV-1a over the tensor lengths: equal layouts give equal digests.
uint64_t DigestOf(const BucketLayout& layout) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const BucketSegment& segment : layout.segments()) {
    for (int byte = 0; byte < 8; ++byte) hash = (hash ^ ((segment.count >> (8 * byte)) & 0xff)) * 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

bool AgreeOnCall(MPI_Comm world, const BucketLayout& layout, GradientHeader* header, const std::string& localProblem,
                 CallMemory memory, double timeoutSeconds) {
  int rank = 0;
  int size = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(world, &rank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(world, &size));

  std::vector<uint64_t> mine(kFieldCount, 0);
  mine[kProblem] = localProblem.empty() ? 0 : 1;
  mine[kElements] = layout.elements();
  mine[kTensors] = layout.segments().size();
  mine[kTensorSizes] = DigestOf(layout);
  mine[kMemory] = static_cast<uint64_t>(memory);
  if (header != nullptr) {
    mine[kHasHeader] = 1;
    mine[kEvalCount] = header->evalErrors.size();
    mine[kSamples] = header->numSamples;
    mine[kSamplesWithLabel] = header->numSamplesWithLabel;
    mine[kCriterion] = BitsOf(header->criterion);
  }
  const std::vector<uint64_t> records = AllGather(world, mine, size, timeoutSeconds);
  for (int r = 0; r < size; ++r) {
    if (records[static_cast<size_t>(r) * kFieldCount + kProblem] != 0) {
      throw UsageError("AggregateGradients: " + AgreeOnProblem(world, localProblem));
    }
  }
  RequireSame(records, size, kMemory, "where the gradients live (0: host memory, 1: GPU memory)", rank);
  RequireSame(records, size, kElements, "the number of gradient elements", rank);
  RequireSame(records, size, kTensors, "the number of (non-empty) gradient tensors", rank);
  RequireSame(records, size, kTensorSizes, "the tensor sizes (a digest of them)", rank);
  RequireSame(records, size, kHasHeader, "whether a header is passed (1) or not (0)", rank);
  RequireSame(records, size, kEvalCount, "the number of evalErrors entries in the header", rank);
  if (header == nullptr) return true;

  const bool contributes = header->numSamples != 0;
  GradientHeader sum;
  for (int r = 0; r < size; ++r) {
    const uint64_t* record = &records[static_cast<size_t>(r) * kFieldCount];
    sum.numSamples += record[kSamples];
    sum.numSamplesWithLabel += record[kSamplesWithLabel];
    sum.criterion += DoubleOf(record[kCriterion]);
  }
  const size_t evalCount = header->evalErrors.size();
  sum.evalErrors.resize(evalCount);
  if (evalCount > 0) {
    std::vector<uint64_t> evals;
    evals.reserve(2 * evalCount);
    for (const EvalError& eval : header->evalErrors) {
      evals.push_back(BitsOf(eval.errorSum));
      evals.push_back(eval.numSamples);
    }
    const std::vector<uint64_t> allEvals = AllGather(world, evals, size, timeoutSeconds);
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < evalCount; ++i) {
        const uint64_t* entry = &allEvals[static_cast<size_t>(r) * 2 * evalCount + 2 * i];
        sum.evalErrors[i].errorSum += DoubleOf(entry[0]);
        sum.evalErrors[i].numSamples += entry[1];
      }
    }
  }
  *header = std::move(sum);
  return contributes;
}

}  // namespace gradagg

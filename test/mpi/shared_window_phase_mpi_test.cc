// The host intra-node phases on their own (intra_node/shared_window_phase.h): bit-exact sums in local-rank order through
// many ring rounds, buffers of any shape, shards that change from call to call, and a late rank caught in time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mpi_test_support.h"
#include "intra_node/shared_window_phase.h"
#include "timeout_expectation.h"

namespace gradagg {
namespace {

using test::RandomGradient;
using test::SameBits;
using test::TestRanksPerNode;
using test::WorldRank;

// The ranks of this rank's node, as the test layout emulates it.
struct Node {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int firstWorldRank = 0;

  Node() {
    const int perNode = TestRanksPerNode();
    if (perNode > 0) {
      MPI_Comm_split(MPI_COMM_WORLD, WorldRank() / perNode, WorldRank(), &comm);
    } else {
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, WorldRank(), MPI_INFO_NULL, &comm);
    }
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    firstWorldRank = WorldRank() - rank;
  }
  ~Node() { MPI_Comm_free(&comm); }
};

// One call's shape: the gradient's buffers and the shards (lengths in local-rank order, the last takes the rest).
struct Shape {
  std::vector<size_t> buffers;
  std::vector<size_t> shardLengths;  // the first local ranks'; the others an even share, the last what is left
};

std::vector<ElementRange> Shards(const Shape& shape, size_t total, int ranks) {
  std::vector<ElementRange> shards;
  size_t begin = 0;
  for (int l = 0; l < ranks; ++l) {
    const size_t index = static_cast<size_t>(l);
    const size_t wanted = l + 1 == ranks                      ? total - begin
                          : index < shape.shardLengths.size() ? shape.shardLengths[index]
                                                              : total / static_cast<size_t>(ranks);
    const size_t length = std::min(wanted, total - begin);
    shards.push_back({begin, length});
    begin += length;
  }
  return shards;
}

// What phase 2 might do to a stripe: anything, as long as the all-gather carries it.
float Transform(float sum) { return sum * 0.5f - 3.0f; }

// Runs `shape` through ReduceScatter (stripe in the caller's buffer or in place), a stand-in phase 2, and AllGather,
// or through AllReduce, and checks every element against the serial sum in local-rank order (and Transform).
void CheckCall(Node& node, SharedWindowPhase& phase, const Shape& shape, const std::string& path, uint32_t seed) {
  size_t total = 0;
  for (size_t length : shape.buffers) total += length;
  std::vector<std::vector<float>> inputs;  // every local rank's, as each would make it
  for (int l = 0; l < node.size; ++l) inputs.push_back(RandomGradient(total, seed, node.firstWorldRank + l));
  std::vector<float> expected(total);
  for (size_t i = 0; i < total; ++i) {
    float sum = inputs[0][i];
    for (int l = 1; l < node.size; ++l) sum += inputs[static_cast<size_t>(l)][i];
    expected[i] = path == "fused" ? sum : Transform(sum);
  }

  std::vector<std::vector<float>> buffers;
  std::vector<FloatSpan> spans;
  size_t offset = 0;
  for (size_t length : shape.buffers) {
    const float* mine = inputs[static_cast<size_t>(node.rank)].data() + offset;
    buffers.emplace_back(mine, mine + length);
    offset += length;
  }
  for (auto& buffer : buffers) spans.push_back({buffer.data(), buffer.size()});
  const FlatBuffers flat(spans);
  const std::vector<ElementRange> shards = Shards(shape, total, node.size);
  const ElementRange mine = shards[static_cast<size_t>(node.rank)];

  if (path == "fused") {
    ASSERT_TRUE(phase.AllReduce(flat));
  } else {
    std::vector<float> own(mine.count);
    float* stripe = path == "in place" ? phase.StripeInPlace(flat, shards) : own.data();
    if (path == "in place" && stripe == nullptr) stripe = own.data();  // the shard spans buffers
    phase.ReduceScatter(flat, shards, stripe);
    for (size_t i = 0; i < mine.count; ++i) stripe[i] = Transform(stripe[i]);
    phase.AllGather(stripe, shards, flat);
  }
  std::vector<float> result(total);
  flat.CopyOut({0, total}, result.data());
  EXPECT_TRUE(SameBits(result, expected)) << path << ", " << total << " elements, world rank " << WorldRank();
}

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {{1000}, {}},                    // even-ish shards, one buffer
      {{3, 500, 0, 497}, {7, 900}},    // uneven shards across buffer boundaries
      {{1}, {}},                       // fewer elements than ranks: empty shards
      {{40000}, {30000}},              // many rounds at the default chunk, one long shard
      {{777, 5, 9000}, {0, 4000, 1}},  // an empty shard first
      {{1000}, {}},                    // the first shape again, after others
  };
  return shapes;
}

// Tiny chunks (many rounds, the ring reused over and over inside one call) and the default, every path, the shapes
// in a row so that each call's shards differ from the last call's.
TEST(SharedWindowPhase, SumsEveryElementInLocalRankOrderThroughTheRing) {
  Node node;
  for (size_t chunk : {size_t{16}, size_t{0}}) {
    SharedWindowPhase phase(node.comm, 60.0, chunk);
    uint32_t seed = 1;
    for (int pass = 0; pass < 2; ++pass) {
      for (const std::string path : {"stripe", "in place", "fused"}) {
        for (const Shape& shape : Shapes()) CheckCall(node, phase, shape, path, seed++);
      }
    }
  }
}

TEST(SharedWindowPhase, RefusesShardsThatDoNotFit) {
  Node node;
  SharedWindowPhase phase(node.comm, 60.0);
  std::vector<float> values(10);
  const FlatBuffers flat({{values.data(), values.size()}});
  std::vector<float> stripe(20);
  EXPECT_THROW(phase.ReduceScatter(flat, std::vector<ElementRange>(static_cast<size_t>(node.size) + 1), stripe.data()),
               std::invalid_argument);
  std::vector<ElementRange> past(static_cast<size_t>(node.size), ElementRange{0, 0});
  past.back() = {5, 6};
  EXPECT_THROW(phase.ReduceScatter(flat, past, stripe.data()), std::out_of_range);
}

// A local rank that never comes: the others give up after the timeout, naming it.
TEST(SharedWindowPhase, ALocalRankThatNeverArrivesIsNamedWithinTheTimeout) {
  Node node;
  if (node.size < 2) GTEST_SKIP() << "one rank per node";
  const double seconds = 2.0;
  std::vector<float> values(4096, 1.0f);
  const FlatBuffers flat({{values.data(), values.size()}});
  {
    SharedWindowPhase phase(node.comm, seconds);
    if (node.rank != node.size - 1) {
      test::ExpectTimeoutNamingRank([&] { phase.AllReduce(flat); }, "shared window",
                                    node.firstWorldRank + node.size - 1, seconds, 10.0);
    }
    phase.Abandon();  // the window is left to MPI_Finalize: the absent rank's view of it is out of step
  }
  MPI_Barrier(node.comm);
}

}  // namespace
}  // namespace gradagg

// The trainer's --local-steps run (apps/train/main.cc) in one process, as the oracle for CTest train_local_steps:
// every rank's CPU model, its slice of each global batch and the inner optimizer from the trainer's own code
// (training_data.h, model.h, optimizer.h), the outer step from outer_step.h, and every sum from the serial
// simulation, the judge of AggregateGradients (aggregator/serial_simulation.h). Writes rank 0's final parameters as
// raw float32, which must equal the trainer's --dump-parameters byte for byte.
//
//   local_steps_reference --ranks 4 --ranks-per-node 2 --local-steps 3 --bits 1 ... --dump-parameters FILE
//
// Per step t, over the whole run:
//   1. each simulated rank r computes the gradient of its slice, and carries its momentum as the trainer does;
//   2. each node's gradients are summed exactly (the simulation of one node at 32 bits: local-rank order), and each
//      of its ranks steps its inner optimizer on that sum over the node's samples;
//   3. after every H-th step and the last: each rank's outer gradient, summed across nodes by the simulation of all
//      ranks at --bits (its carried error lasting from outer step to outer step), and the outer step.
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "aggregator/serial_simulation.h"
#include "mlp.h"
#include "model.h"
#include "optimizer.h"
#include "outer_step.h"
#include "training_data.h"

namespace gradagg::train {
namespace {

namespace po = boost::program_options;

// The trainer's flags that shape a --local-steps run on the CPU model, with its defaults.
struct ReferenceOptions {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int ranks = 4;
  int ranksPerNode = 2;
  int epochs = 1;
  size_t batch = 64;
  size_t trainSubset = 0;
  uint64_t seed = 1;
  std::string optimizerName = "momentum";
  OptimizerSettings optimizer;
  LocalStepSettings local;
  AggregatorOptions aggregator;
  std::string dumpParameters;
};

ReferenceOptions Parse(int argc, char** argv) {
  ReferenceOptions o;
  o.aggregator.bits = 32;  // the trainer's defaults
  o.aggregator.meanThreshold = true;
  o.aggregator = ApplyEnvironment(o.aggregator);
  po::options_description description("local_steps_reference: the trainer's --local-steps run in one process");
  description.add_options()("data", po::value(&o.data))("ranks", po::value(&o.ranks))(
      "ranks-per-node", po::value(&o.aggregator.ranksPerNode))("epochs", po::value(&o.epochs))(
      "batch", po::value(&o.batch))("train-subset", po::value(&o.trainSubset))("seed", po::value(&o.seed))(
      "optimizer", po::value(&o.optimizerName))("lr", po::value(&o.optimizer.learningRate))(
      "bits", po::value(&o.aggregator.bits))("local-steps", po::value(&o.local.localSteps))(
      "outer-lr", po::value(&o.local.outerLearningRate))("outer-momentum", po::value(&o.local.outerMomentum))(
      "dump-parameters", po::value(&o.dumpParameters));
  po::variables_map values;
  po::store(po::parse_command_line(argc, argv, description), values);
  po::notify(values);
  o.optimizer.kind = ParseOptimizerKind(o.optimizerName);
  o.ranksPerNode = o.aggregator.ranksPerNode;
  Validate(o.local);
  Validate(o.aggregator);
  if (!o.local.enabled() || o.ranksPerNode < 1 || o.ranks % o.ranksPerNode != 0 || o.dumpParameters.empty()) {
    throw std::invalid_argument("needs --local-steps, --ranks a multiple of --ranks-per-node, and --dump-parameters");
  }
  return o;
}

// The model's gradient tensors end to end.
std::vector<float> FlatGradient(const Model& model) {
  std::vector<float> flat;
  for (const GradientBuffer& tensor : model.gradient().host)
    flat.insert(flat.end(), tensor.data, tensor.data + tensor.count);
  return flat;
}

void SetGradient(const Model& model, const std::vector<float>& flat) {
  size_t offset = 0;
  for (const GradientBuffer& tensor : model.gradient().host) {
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(offset), tensor.count, tensor.data);
    offset += tensor.count;
  }
}

std::vector<RankPlacement> Nodes(int nodes, int perNode) {
  std::vector<RankPlacement> placements;
  for (int n = 0; n < nodes; ++n) {
    for (int l = 0; l < perNode; ++l) placements.push_back({n, l});
  }
  return placements;
}

void Run(const ReferenceOptions& o) {
  const Dataset train = LoadDataset(o.data, "train", o.trainSubset);
  const size_t stepsPerEpoch = train.count() / (o.batch * static_cast<size_t>(o.ranks));
  if (stepsPerEpoch == 0) throw std::invalid_argument("fewer training images than one global batch");
  // The trainer's default schedule (cosine to 0 at the end, no warm-up) and its momentum placement without --stale.
  ScheduleSettings schedule;
  schedule.kind = ScheduleKind::kCosine;
  schedule.totalSteps = static_cast<size_t>(o.epochs) * stepsPerEpoch;
  OptimizerSettings settings = o.optimizer;
  settings.momentumInside = true;
  const Optimizer optimizer(settings, schedule);

  const int nodes = o.ranks / o.ranksPerNode;
  Mlp initial;
  initial.Initialize(o.seed);
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::unique_ptr<OuterStep>> outer;
  for (int r = 0; r < o.ranks; ++r) {
    models.push_back(MakeCpuModel());
    models.back()->SetParameters(initial.parameters());
    outer.push_back(std::make_unique<OuterStep>(o.local, initial.parameters(), models.back()->tensors()));
  }
  std::vector<size_t> tensorSizes;
  for (const Tensor& t : models[0]->tensors()) tensorSizes.push_back(t.size);
  AggregatorOptions exact = o.aggregator;
  exact.bits = 32;
  std::vector<SerialSimulation> insideNode;
  for (int n = 0; n < nodes; ++n) insideNode.emplace_back(Nodes(1, o.ranksPerNode), exact);
  SerialSimulation acrossNodes(Nodes(nodes, o.ranksPerNode), o.aggregator);

  std::vector<float> images(o.batch * Mlp::kInputs);
  std::vector<uint8_t> labels(o.batch);
  const double nodeSamples = static_cast<double>(o.batch) * o.ranksPerNode;
  size_t steps = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const std::vector<size_t> order = EpochOrder(train.count(), o.seed, epoch);
    for (size_t step = 0; step < stepsPerEpoch; ++step, ++steps) {
      // 1. Every rank's gradient of its slice, momentum carried.
      for (int r = 0; r < o.ranks; ++r) {
        SliceBatch(train, order, step, r, o.ranks, o.batch, images.data(), labels.data());
        models[static_cast<size_t>(r)]->ComputeGradient(images.data(), labels.data(), o.batch);
        models[static_cast<size_t>(r)]->CarryMomentum(optimizer.BeforeAggregation(steps, static_cast<double>(o.batch)));
      }
      // 2. Each node's exact sum, and the inner step on it.
      for (int n = 0; n < nodes; ++n) {
        std::vector<std::vector<float>> inputs;
        for (int l = 0; l < o.ranksPerNode; ++l) inputs.push_back(FlatGradient(*models[n * o.ranksPerNode + l]));
        const std::vector<float> sum = insideNode[static_cast<size_t>(n)].Run(inputs, {}, tensorSizes);
        for (int l = 0; l < o.ranksPerNode; ++l) {
          Model& model = *models[static_cast<size_t>(n * o.ranksPerNode + l)];
          SetGradient(model, sum);
          model.Step(optimizer.AfterAggregation(steps, nodeSamples));
        }
      }
      // 3. The outer step.
      if (!IsOuterStep(o.local, steps, schedule.totalSteps)) continue;
      std::vector<std::vector<float>> outerGradients;
      for (int r = 0; r < o.ranks; ++r) {
        OuterStep& rankOuter = *outer[static_cast<size_t>(r)];
        rankOuter.ComputeOuterGradient(models[static_cast<size_t>(r)]->Parameters(), r % o.ranksPerNode == 0);
        outerGradients.push_back(rankOuter.outerGradient());
      }
      const std::vector<float> sum = acrossNodes.Run(outerGradients, {}, tensorSizes);
      for (int r = 0; r < o.ranks; ++r) {
        OuterStep& rankOuter = *outer[static_cast<size_t>(r)];
        rankOuter.outerGradient() = sum;
        models[static_cast<size_t>(r)]->SetParameters(rankOuter.Apply(nodes));
      }
    }
  }
  // Every rank ends an outer step with the same parameters, and the run ends with one.
  const std::vector<float> parameters = models[0]->Parameters();
  for (const auto& model : models) {
    const std::vector<float> other = model->Parameters();
    if (std::memcmp(other.data(), parameters.data(), parameters.size() * sizeof(float)) != 0)
      throw std::logic_error("ranks ended with different parameters");
  }
  std::ofstream file(o.dumpParameters, std::ios::binary);
  file.write(reinterpret_cast<const char*>(parameters.data()),
             static_cast<std::streamsize>(parameters.size() * sizeof(float)));
  if (!file) throw std::runtime_error("cannot write " + o.dumpParameters);
  std::printf("local_steps_reference: %d ranks as %d nodes x %d, %zu steps, H %d, %d bits: wrote %s\n", o.ranks, nodes,
              o.ranksPerNode, steps, o.local.localSteps, o.aggregator.bits, o.dumpParameters.c_str());
}

}  // namespace
}  // namespace gradagg::train

int main(int argc, char** argv) {
  try {
    gradagg::train::Run(gradagg::train::Parse(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "local_steps_reference: %s\n", error.what());
    return 1;
  }
  return 0;
}

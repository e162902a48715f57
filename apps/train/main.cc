// train: a data-parallel MLP on Fashion-MNIST that sums its gradients with gradagg, as a user's trainer would
// (only gradagg's public API, <gradagg/...>, and MPI).
//
//   mpirun -np 4 build/bin/train --ranks-per-node 2 --bits 1 --epochs 10 --csv run.csv
//
//   1. every rank loads the data; rank 0 draws the initial weights and broadcasts them;
//   2. per step, each rank takes its slice of the global batch (a fixed shuffle per epoch), backpropagates, and
//      AggregateGradients sums the six gradient tensors (in host memory, or on the GPU with --device cuda) and the
//      header (loss, samples, errors) over all ranks (--exchange mpi: MPI_Allreduce of the same, the baseline);
//   3. the optimizer (optimizer.h) on sum / aggregated numSamples (CNTK's rule). By default the momentum travels
//      inside the aggregation: each rank adds beta * m to its gradient before the call and takes the aggregate as
//      its new m (--aggregate gradient applies the momentum after instead). With --stale, the Aggregator's
//      double-buffered mode: step t applies step t-1's sum, aggregated in the background during step t's computation;
//   4. after each epoch: train loss, test accuracy (each rank scores a slice), compute vs aggregation time.
// With --local-steps H (local SGD, DiLoCo's outer step; outer_step.h), step 2 sums exactly inside each node (an
// Aggregator over the node's ranks at 32 bits), and after every H-th step the nodes exchange how far they moved
// through an Aggregator over all ranks at --bits, followed by an outer Nesterov step.
#include <gradagg/aggregator.h>
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "aggregation_probe.h"
#include "mlp.h"
#include "model.h"
#include "optimizer.h"
#include "outer_step.h"
#include "training_data.h"

namespace gradagg::train {
namespace {

namespace po = boost::program_options;

struct Options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string device = "cpu";
  int epochs = 10;
  size_t batch = 64;  // per rank
  OptimizerSettings optimizer;
  ScheduleSettings schedule;
  std::string optimizerName = "momentum";
  // The default recipe: momentum 0.9 at float32's best learning rate with a cosine schedule (bench/NOTES.md).
  std::string scheduleName = "cosine";
  std::string aggregate = "auto";    // what goes through AggregateGradients: momentum, gradient, auto
  std::string exchange = "gradagg";  // gradagg, or mpi: MPI_Allreduce of the same tensors, the baseline
  double warmupEpochs = 0.0;
  int stepEpochs = 0;
  uint64_t seed = 1;
  std::string threshold;  // --threshold zero|mean: sets aggregator.meanThreshold
  std::string probe;      // --probe FILE
  size_t probeEvery = 10;
  size_t trainSubset = 0;  // 0: all
  size_t testSubset = 0;
  std::string csv;
  std::string dumpGradients;   // prefix: rank 0's own gradient (before aggregation) at a few steps, CPU model
  std::string dumpParameters;  // rank 0's final parameters, raw float32
  LocalStepSettings local;
  AggregatorOptions aggregator;
};

std::string ModeName(const Options& o) {
  if (o.exchange == "mpi") return "MPI_Allreduce";
  std::string name = o.aggregator.bits == 32 ? "float32" : std::to_string(o.aggregator.bits) + "-bit";
  if (o.aggregator.bits == 1) name += o.aggregator.meanThreshold ? " mean" : " zero";
  if (o.aggregator.bits != 32) name += o.aggregator.errorFeedback ? " EF" : " no-EF";
  if (o.optimizer.kind != OptimizerKind::kSgd && !o.optimizer.momentumInside) name += " momentum-after";
  if (o.local.enabled()) name += " local-steps " + std::to_string(o.local.localSteps);
  return o.aggregator.doubleBuffered ? name + " stale" : name;
}

// Parses the command line; returns false (after printing on rank 0) when the program should stop.
bool Parse(int argc, char** argv, int rank, Options& o, int& exitCode) {
  po::options_description description(
      "train: data-parallel MLP (784-256-128-10) on Fashion-MNIST with gradagg.\n"
      "Usage: mpirun -np N train [options]\n\nOptions");
  description.add_options()("help,h", "print this help")(
      "data", po::value(&o.data), "directory of the IDX files, plain or .gz (default Debian's dataset-fashion-mnist)")(
      "device", po::value(&o.device), "cpu or cuda (one GPU per rank, by rank within the host; default cpu)")(
      "epochs", po::value(&o.epochs), "epochs (default 10)")("batch", po::value(&o.batch),
                                                             "samples per rank per step (default 64)")(
      "optimizer", po::value(&o.optimizerName),
      "sgd, momentum (heavy ball), nesterov, adam or adamw (default momentum)")(
      "lr", po::value(&o.optimizer.learningRate), "peak learning rate (default 0.1)")(
      "momentum", po::value(&o.optimizer.momentum), "momentum of momentum and nesterov; beta1 of adam (default 0.9)")(
      "unit-gain", "momentum = beta m + (1 - beta) g instead of beta m + g (CNTK's form)")(
      "beta2", po::value(&o.optimizer.beta2), "adam's beta2 (default 0.999)")(
      "epsilon", po::value(&o.optimizer.epsilon), "adam's epsilon (default 1e-8)")(
      "weight-decay", po::value(&o.optimizer.weightDecay),
      "weight decay: L2 in the gradient; decoupled for adamw (default 0)")(
      "schedule", po::value(&o.scheduleName),
      "learning rate after the warm-up: constant, step or cosine (to 0 at the "
      "end; default cosine)")(
      "warmup-epochs", po::value(&o.warmupEpochs),
      "linear warm-up from lr/steps to lr over this many epochs, may be fractional (default 0)")(
      "step-epochs", po::value(&o.stepEpochs), "step schedule: multiply the lr by --step-factor every N epochs")(
      "step-factor", po::value(&o.schedule.stepFactor), "step schedule's factor (default 0.1)")(
      "aggregate", po::value(&o.aggregate),
      "what goes through AggregateGradients: momentum (beta m + g; each rank takes the aggregate as its m), gradient "
      "(the momentum applied after), or auto: momentum, gradient with --stale (default auto)")(
      "exchange", po::value(&o.exchange),
      "gradagg (AggregateGradients), or mpi: MPI_Allreduce of the same float32 tensors and header sums, the baseline "
      "a user would pick instead (CPU model, 32 bits, no --stale; default gradagg)")(
      "seed", po::value(&o.seed), "seed of the initial weights and the shuffle (default 1)")(
      "train-subset", po::value(&o.trainSubset), "use the first N training images (default all)")(
      "test-subset", po::value(&o.testSubset), "use the first N test images (default all)")(
      "bits", po::value(&o.aggregator.bits), "bits across nodes: 1, 2, 4, 8, 32 (default 32)")(
      "threshold", po::value(&o.threshold),
      "1 bit: zero (CNTK's: each side of 0 decodes to its mean) or mean (each side of the bucket mean decodes to the "
      "mean -/+ the mean absolute deviation; default mean, which measured closer to float32 with momentum)")(
      "no-error-feedback", "drop quantization error instead of carrying it")(
      "stale", "double-buffered: step t applies step t-1's aggregate")(
      "ranks-per-node", po::value(&o.aggregator.ranksPerNode), "emulate nodes of this many ranks (default: hosts)")(
      "csv", po::value(&o.csv), "also write one row per epoch to this CSV file")(
      "probe", po::value(&o.probe),
      "CPU model: write to this CSV, every --probe-every steps, the cosine between the gradient the optimizer used "
      "and the exact one, the step's relative error and what error feedback still owes (bench/NOTES.md)")(
      "probe-every", po::value(&o.probeEvery), "steps between --probe rows (default 10)")(
      "dump-gradients", po::value(&o.dumpGradients),
      "CPU model: rank 0 writes its own gradient before aggregation at steps 1, 100 and 1000 to PREFIX.stepN.f32 "
      "(raw float32) and the tensor lengths to PREFIX.tensors (for gradagg_quantizer_error)")(
      "dump-parameters", po::value(&o.dumpParameters), "rank 0 writes the final parameters to FILE (raw float32)")(
      "local-steps", po::value(&o.local.localSteps),
      "local SGD (DiLoCo): every step sums exactly inside each node only; after every H-th step (and the last) the "
      "nodes exchange how far they moved at --bits and take an outer Nesterov step (default 0: every step sums over "
      "all ranks)")("outer-lr", po::value(&o.local.outerLearningRate),
                    "--local-steps: the outer step's learning rate (default 0.7)")(
      "outer-momentum", po::value(&o.local.outerMomentum),
      "--local-steps: the outer step's Nesterov momentum, in [0, 1) (default 0.9)");
  // The trainer's defaults; GRADAGG_* variables, then flags, override them.
  o.aggregator.bits = 32;
  o.aggregator.meanThreshold = true;
  try {
    o.aggregator = ApplyEnvironment(o.aggregator);
    po::variables_map values;
    po::store(po::parse_command_line(argc, argv, description), values);
    po::notify(values);
    if (values.count("help")) {
      if (rank == 0) std::printf("%s", (std::ostringstream() << description).str().c_str());
      exitCode = 0;
      return false;
    }
    o.aggregator.errorFeedback = values.count("no-error-feedback") == 0;
    if (values.count("threshold")) {
      if (o.threshold != "zero" && o.threshold != "mean")
        throw std::invalid_argument("--threshold must be zero or mean, not '" + o.threshold + "'");
      o.aggregator.meanThreshold = o.threshold == "mean";
    }
    if (values.count("stale")) o.aggregator.doubleBuffered = true;
    if (o.device != "cpu" && o.device != "cuda") throw std::invalid_argument("--device must be cpu or cuda");
    if (o.epochs < 1 || o.batch < 1) throw std::invalid_argument("--epochs and --batch must be at least 1");
    if (!o.dumpGradients.empty() && o.device != "cpu")
      throw std::invalid_argument("--dump-gradients works with the CPU model (--device cpu)");
    o.optimizer.kind = ParseOptimizerKind(o.optimizerName);
    o.schedule.kind = ParseScheduleKind(o.scheduleName);
    o.optimizer.unitGain = values.count("unit-gain") != 0;
    if (o.optimizer.kind == OptimizerKind::kSgd && values.count("momentum") != 0)
      throw std::invalid_argument("--optimizer sgd takes no --momentum (use --optimizer momentum)");
    if (o.aggregate != "auto" && o.aggregate != "momentum" && o.aggregate != "gradient")
      throw std::invalid_argument("--aggregate must be momentum, gradient or auto, not '" + o.aggregate + "'");
    if (o.aggregate == "momentum" && o.aggregator.doubleBuffered)
      throw std::invalid_argument(
          "--aggregate momentum needs each step's aggregate at once; with --stale use gradient");
    o.optimizer.momentumInside = o.aggregate == "momentum" || (o.aggregate == "auto" && !o.aggregator.doubleBuffered);
    if (!(o.warmupEpochs >= 0.0)) throw std::invalid_argument("--warmup-epochs must be 0 or more");
    if (o.stepEpochs < 0) throw std::invalid_argument("--step-epochs must be 0 or more");
    if (!o.probe.empty() && (o.device != "cpu" || o.aggregator.doubleBuffered))
      throw std::invalid_argument("--probe works with the CPU model and without --stale");
    if (o.exchange != "gradagg" && o.exchange != "mpi")
      throw std::invalid_argument("--exchange must be gradagg or mpi, not '" + o.exchange + "'");
    if (o.exchange == "mpi" && (o.device != "cpu" || o.aggregator.bits != 32 || o.aggregator.doubleBuffered))
      throw std::invalid_argument("--exchange mpi sums float32 host tensors: --device cpu, --bits 32, no --stale");
    Validate(o.local);
    if (!o.local.enabled() && (values.count("outer-lr") != 0 || values.count("outer-momentum") != 0))
      throw std::invalid_argument("--outer-lr and --outer-momentum need --local-steps");
    if (o.local.enabled()) {
      // Inner steps need each node's exact sum at once, and the outer step is an Aggregator call of its own.
      if (o.aggregator.doubleBuffered)
        throw std::invalid_argument("--local-steps takes no --stale: each inner step needs its node's sum at once");
      if (o.exchange != "gradagg")
        throw std::invalid_argument("--local-steps takes no --exchange mpi: its steps sum inside nodes only");
      if (!o.probe.empty())
        throw std::invalid_argument(
            "--local-steps takes no --probe: the probe measures a quantized sum every step, and inner steps are exact");
    }
    Validate(o.aggregator);
  } catch (const std::exception& error) {
    if (rank == 0) std::fprintf(stderr, "train: error: %s (try --help)\n", error.what());
    exitCode = 2;
    return false;
  }
  return true;
}

// --dump-gradients: the host gradient's tensors end to end as raw float32, and once their lengths.
void DumpGradient(const std::string& prefix, size_t step, const GradientTensors& gradient) {
  const std::string path = prefix + ".step" + std::to_string(step) + ".f32";
  std::ofstream values(path, std::ios::binary);
  std::ofstream lengths(prefix + ".tensors");
  for (size_t i = 0; i < gradient.host.size(); ++i) {
    const GradientBuffer& tensor = gradient.host[i];
    values.write(reinterpret_cast<const char*>(tensor.data),
                 static_cast<std::streamsize>(tensor.count * sizeof(float)));
    lengths << (i == 0 ? "" : ",") << tensor.count;
  }
  lengths << "\n";
  if (!values || !lengths) throw std::runtime_error("cannot write " + path);
}

// Every MPI call of the trainer goes through this (COMM_WORLD returns errors instead of aborting, see main): a failure
// throws, naming the call and MPI's own words for the error.
void CheckMpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string(call) + " failed: " + text);
}

// An MPI communicator this code made, freed with it.
class OwnedCommunicator {
 public:
  OwnedCommunicator() = default;
  ~OwnedCommunicator() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  OwnedCommunicator(const OwnedCommunicator&) = delete;
  OwnedCommunicator& operator=(const OwnedCommunicator&) = delete;
  MPI_Comm* out() { return &comm_; }
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// This rank's index on its host: the GPU it takes.
int HostRank(int rank) {
  OwnedCommunicator host;
  CheckMpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, host.out()),
           "MPI_Comm_split_type (ranks of this host)");
  int hostRank = 0;
  CheckMpi(MPI_Comm_rank(host.get(), &hostRank), "MPI_Comm_rank of the host's communicator");
  return hostRank;
}

// --exchange mpi: MPI_Allreduce of every host tensor and of the header's counts and sums, in place.
void MpiAllreduce(const GradientTensors& gradient, GradientHeader* header) {
  for (const GradientBuffer& tensor : gradient.host) {
    if (tensor.count > static_cast<size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument("--exchange mpi: a tensor of more than 2^31 elements");
    CheckMpi(
        MPI_Allreduce(MPI_IN_PLACE, tensor.data, static_cast<int>(tensor.count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce of a gradient");
  }
  std::vector<uint64_t> counts = {header->numSamples, header->numSamplesWithLabel};
  std::vector<double> sums = {header->criterion};
  for (const EvalError& error : header->evalErrors) {
    counts.push_back(error.numSamples);
    sums.push_back(error.errorSum);
  }
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, counts.data(), static_cast<int>(counts.size()), MPI_UINT64_T, MPI_SUM,
                         MPI_COMM_WORLD),
           "MPI_Allreduce of the header's counts");
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
           "MPI_Allreduce of the header's sums");
  header->numSamples = counts[0];
  header->numSamplesWithLabel = counts[1];
  header->criterion = sums[0];
  for (size_t i = 0; i < header->evalErrors.size(); ++i) {
    header->evalErrors[i].numSamples = counts[2 + i];
    header->evalErrors[i].errorSum = sums[1 + i];
  }
}

// AggregateGradients (and FlushDoubleBuffer) wherever the model keeps its gradient, or the MPI_Allreduce baseline;
// device calls return with the result in place.
void Aggregate(Aggregator& aggregator, const GradientTensors& gradient, GradientHeader* header, bool mpi) {
  if (mpi) {
    MpiAllreduce(gradient, header);
  } else if (gradient.onDevice()) {
    aggregator.AggregateGradients(gradient.device, gradient.stream, header);
  } else {
    aggregator.AggregateGradients(gradient.host, header);
  }
}

bool Flush(Aggregator& aggregator, const GradientTensors& gradient, GradientHeader* header) {
  return gradient.onDevice() ? aggregator.FlushDoubleBuffer(gradient.device, gradient.stream, header)
                             : aggregator.FlushDoubleBuffer(gradient.host, header);
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Run(const Options& o, int rank, int size) {
  const Dataset train = LoadDataset(o.data, "train", o.trainSubset);
  const Dataset test = LoadDataset(o.data, "t10k", o.testSubset);
  const size_t stepsPerEpoch = train.count() / (o.batch * static_cast<size_t>(size));
  if (stepsPerEpoch == 0) throw std::invalid_argument("fewer training images than one global batch");
  ScheduleSettings schedule = o.schedule;
  schedule.warmupSteps = static_cast<size_t>(o.warmupEpochs * static_cast<double>(stepsPerEpoch));
  schedule.stepEvery = static_cast<size_t>(o.stepEpochs) * stepsPerEpoch;
  schedule.totalSteps = static_cast<size_t>(o.epochs) * stepsPerEpoch;
  const Optimizer optimizer = [&] {
    try {
      return Optimizer(o.optimizer, schedule);
    } catch (const std::invalid_argument& error) {  // the same on every rank
      throw UsageError(error.what());
    }
  }();

  // 1. The same initial weights everywhere, on the chosen device (a GPU per rank, by rank within the host).
  const std::unique_ptr<Model> model = o.device == "cuda" ? MakeCudaModel(HostRank(rank)) : MakeCpuModel();
  Mlp initial;
  if (rank == 0) initial.Initialize(o.seed);
  CheckMpi(MPI_Bcast(initial.parameters().data(), static_cast<int>(initial.parameters().size()), MPI_FLOAT, 0,
                     MPI_COMM_WORLD),
           "MPI_Bcast of the initial weights");
  model->SetParameters(initial.parameters());
  // Over all ranks at --bits: every step's sum, or with --local-steps the outer steps' only. Then each step's sum
  // is either that one's or, with --local-steps, the node's own, exact (one node: no quantization).
  Aggregator acrossNodes(MPI_COMM_WORLD, o.aggregator);
  std::unique_ptr<Aggregator> insideNode;
  std::unique_ptr<OuterStep> outer;
  const int localRank = acrossNodes.localRank();
  if (o.local.enabled()) {
    // The ranks of this rank's node as the Aggregator places them, in its local-rank order.
    OwnedCommunicator node;
    CheckMpi(MPI_Comm_split(MPI_COMM_WORLD, acrossNodes.nodeIndex(), localRank, node.out()),
             "MPI_Comm_split (ranks of this node)");
    AggregatorOptions exact = o.aggregator;
    exact.bits = 32;
    exact.ranksPerNode = acrossNodes.ranksPerNode();
    insideNode = std::make_unique<Aggregator>(node.get(), exact);
    outer = std::make_unique<OuterStep>(o.local, initial.parameters(), model->tensors());
  }
  Aggregator& stepAggregator = insideNode ? *insideNode : acrossNodes;
  const GradientTensors& gradient = model->gradient();
  // On GPUs the gradient goes to AggregateGradients from device memory: say which path the library chose.
  const std::string devicePath = gradient.onDevice() ? stepAggregator.InitializeDevice() : "";
  std::vector<float> batchImages(o.batch * Mlp::kInputs);
  std::vector<uint8_t> batchLabels(o.batch);
  std::unique_ptr<AggregationProbe> probe;
  if (!o.probe.empty()) {
    probe = std::make_unique<AggregationProbe>(o.probe, o.probeEvery, optimizer.GradientScaleBeforeAggregation(), rank);
  }

  std::ofstream csv;
  if (rank == 0) {
    std::printf("# train: %s on %s, %d ranks as %d nodes x %d, %zu steps/epoch of %zu x %d samples, seed %llu\n",
                ModeName(o).c_str(), o.device.c_str(), size, acrossNodes.nodeCount(), acrossNodes.ranksPerNode(),
                stepsPerEpoch, o.batch, size, static_cast<unsigned long long>(o.seed));
    if (o.local.enabled()) {
      std::printf(
          "# local steps %d: each step sums exactly inside the node; after every %d steps and the last, the nodes' "
          "moves at %d bits and an outer Nesterov step, outer lr %g, outer momentum %g\n",
          o.local.localSteps, o.local.localSteps, o.aggregator.bits, static_cast<double>(o.local.outerLearningRate),
          static_cast<double>(o.local.outerMomentum));
    }
    std::printf(
        "# optimizer %s, lr %g, momentum %g%s, weight decay %g, schedule %s, warm-up %zu steps; aggregated: %s\n",
        ToString(o.optimizer.kind).c_str(), static_cast<double>(o.optimizer.learningRate),
        static_cast<double>(optimizer.settings().momentum), o.optimizer.unitGain ? " (unit gain)" : "",
        static_cast<double>(o.optimizer.weightDecay), ToString(schedule.kind).c_str(), schedule.warmupSteps,
        o.optimizer.momentumInside && optimizer.settings().momentum > 0 ? "momentum" : "gradient");
    if (!devicePath.empty()) std::printf("# gradient aggregated on the GPU: %s\n", devicePath.c_str());
    std::printf("# %5s %7s %10s %9s %9s %10s %12s %16s\n", "epoch", "steps", "train_loss", "train_err", "test_acc",
                "compute_s", "aggregate_s", "cross_B_per_step");
    if (!o.csv.empty()) {
      csv.open(o.csv);
      if (!csv) throw std::runtime_error("cannot write " + o.csv);
      csv << "mode,optimizer,seed,lr,epoch,steps,train_loss,train_error,test_accuracy,compute_s,aggregate_s,"
             "cross_node_bytes_per_step\n";
    }
  }
  size_t steps = 0;
  size_t updates = 0;  // steps applied; with --stale one behind
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const std::vector<size_t> order = EpochOrder(train.count(), o.seed, epoch);
    double lossSum = 0.0;
    double samples = 0.0;
    double errors = 0.0;
    double compute = 0.0;
    double aggregate = 0.0;
    uint64_t crossNodeBytes = 0;  // this rank's, sent by acrossNodes in the epoch
    for (size_t step = 0; step < stepsPerEpoch; ++step, ++steps) {
      // 2. Our slice of the global batch; gradient of its summed loss; aggregation of gradient and header.
      auto start = std::chrono::steady_clock::now();
      SliceBatch(train, order, step, rank, size, o.batch, batchImages.data(), batchLabels.data());
      const BatchResult result = model->ComputeGradient(batchImages.data(), batchLabels.data(), o.batch);
      if (!o.dumpGradients.empty() && rank == 0 && (steps == 0 || steps == 99 || steps == 999))
        DumpGradient(o.dumpGradients, steps + 1, gradient);
      if (probe) probe->BeforeCarry(gradient);
      model->CarryMomentum(optimizer.BeforeAggregation(updates, static_cast<double>(o.batch)));
      if (probe) probe->BeforeAggregation(gradient);
      compute += Seconds(start);

      start = std::chrono::steady_clock::now();
      GradientHeader header;
      header.numSamples = o.batch;
      header.numSamplesWithLabel = o.batch;
      header.criterion = result.lossSum;
      header.evalErrors = {{static_cast<double>(result.errors), o.batch}};
      Aggregate(stepAggregator, gradient, &header, o.exchange == "mpi");
      if (!insideNode && o.exchange != "mpi") crossNodeBytes += acrossNodes.LastStats().interNodeBytesSent;
      aggregate += Seconds(start);
      if (probe) probe->AfterAggregation(steps, gradient);

      // 3. The update. Double-buffered (--stale), the aggregate is the previous step's, and the first call of an
      //    epoch has none (numSamples 0).
      start = std::chrono::steady_clock::now();
      const double total = static_cast<double>(header.numSamples);
      if (total > 0) model->Step(optimizer.AfterAggregation(updates++, total));
      compute += Seconds(start);
      // --local-steps: after every H-th step and the last, the outer step (outer_step.h), the same on every rank.
      if (IsOuterStep(o.local, steps, schedule.totalSteps)) {
        start = std::chrono::steady_clock::now();
        outer->ComputeOuterGradient(model->Parameters(), localRank == 0);
        acrossNodes.AggregateGradients(outer->outerGradientTensors());
        crossNodeBytes += acrossNodes.LastStats().interNodeBytesSent;
        model->SetParameters(outer->Apply(acrossNodes.nodeCount()));
        aggregate += Seconds(start);
      }
      lossSum += header.criterion;
      samples += total;
      errors += header.evalErrors[0].errorSum;
    }
    // Double-buffered: the epoch's last aggregate is still out; apply it before the test.
    GradientHeader last;
    last.evalErrors.resize(1);
    auto start = std::chrono::steady_clock::now();
    if (Flush(stepAggregator, gradient, &last)) {
      aggregate += Seconds(start);
      start = std::chrono::steady_clock::now();
      model->Step(optimizer.AfterAggregation(updates++, static_cast<double>(last.numSamples)));
      compute += Seconds(start);
      lossSum += last.criterion;
      samples += static_cast<double>(last.numSamples);
      errors += last.evalErrors[0].errorSum;
    }

    // 4. Test accuracy: rank r scores images r, r + size, ...
    uint64_t testErrors = 0;
    uint64_t scored = 0;
    std::vector<float> images;
    std::vector<uint8_t> labels;
    for (size_t i = static_cast<size_t>(rank); i < test.count(); i += static_cast<size_t>(size)) {
      images.insert(images.end(), test.images.begin() + static_cast<long>(i * Mlp::kInputs),
                    test.images.begin() + static_cast<long>((i + 1) * Mlp::kInputs));
      labels.push_back(test.labels[i]);
    }
    for (size_t begin = 0; begin < labels.size(); begin += 500) {
      const size_t count = std::min<size_t>(500, labels.size() - begin);
      testErrors += model->CountErrors(images.data() + begin * Mlp::kInputs, labels.data() + begin, count);
      scored += count;
    }
    uint64_t totals[2] = {testErrors, scored};
    CheckMpi(MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD),
             "MPI_Allreduce of the test errors");
    double times[2] = {compute, aggregate};
    CheckMpi(MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce of the times");
    CheckMpi(MPI_Allreduce(MPI_IN_PLACE, &crossNodeBytes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD),
             "MPI_Allreduce of the bytes sent across nodes");
    const double bytesPerStep = static_cast<double>(crossNodeBytes) / static_cast<double>(stepsPerEpoch);
    if (rank == 0) {
      const double accuracy = 1.0 - static_cast<double>(totals[0]) / static_cast<double>(totals[1]);
      std::printf("  %5d %7zu %10.4f %9.4f %9.4f %10.2f %12.2f %16.0f\n", epoch, steps, lossSum / samples,
                  errors / samples, accuracy, times[0], times[1], bytesPerStep);
      std::fflush(stdout);
      if (csv.is_open()) {
        csv << ModeName(o) << "," << ToString(o.optimizer.kind) << "," << o.seed << ","
            << LearningRateAt(schedule, o.optimizer.learningRate, updates == 0 ? 0 : updates - 1) << "," << epoch << ","
            << steps << "," << lossSum / samples << "," << errors / samples << "," << accuracy << "," << times[0] << ","
            << times[1] << "," << bytesPerStep << "\n";
      }
    }
  }
  if (rank == 0 && !o.dumpParameters.empty()) {
    const std::vector<float> parameters = model->Parameters();
    std::ofstream file(o.dumpParameters, std::ios::binary);
    file.write(reinterpret_cast<const char*>(parameters.data()),
               static_cast<std::streamsize>(parameters.size() * sizeof(float)));
    if (!file) throw std::runtime_error("cannot write " + o.dumpParameters);
  }
  return 0;
}

}  // namespace
}  // namespace gradagg::train

int main(int argc, char** argv) {
  int threads = 0;  // the double-buffered mode aggregates on a background thread
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &threads) != MPI_SUCCESS) {
    std::fprintf(stderr, "train: MPI_Init_thread failed\n");
    return 1;
  }
  // Errors come back to CheckMpi, which names the call, instead of ending the job without a word.
  int rank = 0;
  int size = 1;
  if (MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
      MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) {
    std::fprintf(stderr, "train: setting up MPI_COMM_WORLD (error handler, rank, size) failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  gradagg::train::Options options;
  int status = 0;
  if (gradagg::train::Parse(argc, argv, rank, options, status)) {
    try {
      status = gradagg::train::Run(options, rank, size);
    } catch (const gradagg::UsageError& error) {  // raised alike on every rank
      if (rank == 0) std::fprintf(stderr, "train: error: %s\n", error.what());
      status = 2;
    } catch (const std::exception& error) {  // a missing or broken file is seen by every rank; others abort
      std::fprintf(stderr, "train: rank %d: %s\n", rank, error.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (MPI_Finalize() != MPI_SUCCESS && status == 0) status = 1;
  return status;
}

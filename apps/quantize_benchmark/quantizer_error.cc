// How close the 2-, 4- and 8-bit quantizer comes to the best uniform quantizer: single-pass relative L2 error
// (|decode(encode(v)) - v| / |v|, no residual) per bit width and clip factor, on Gaussian data and optionally on a
// gradient dumped by the example trainer (`train --dump-gradients`), beside the optimum of a uniform quantizer with
// L = 2^bits cells for a Gaussian of known variance (computed exactly, cell by cell, from the normal distribution).
//
//   gradagg_quantizer_error [--gradients FILE [--tensors a,b,c]] [--elements N] [--bucket B] [--seed S]
//
// FILE holds raw little-endian float32 values; --tensors gives its tensor lengths (buckets restart at each).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "quantize/bucket_layout.h"
#include "quantize/quantizer.h"

namespace {

using gradagg::BucketLayout;
using gradagg::Quantizer;
using gradagg::QuantizerConfig;

// Mean squared error of the uniform quantizer with `cells` cells over [-clip, clip] on N(0, 1): cell k spans
// [-clip + k*d, -clip + (k+1)*d] (the outer cells reach to infinity) and decodes to its midpoint.
double UniformQuantizerMse(int cells, double clip) {
  const double width = 2.0 * clip / cells;
  const auto pdf = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); };
  const auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  // Integral of (x - m)^2 pdf(x) over [a, b], from the antiderivatives of x^2 pdf, x pdf and pdf.
  const auto piece = [&](double a, double b, double m) {
    const auto second = [&](double x) { return std::isinf(x) ? (x > 0 ? 1.0 : 0.0) : cdf(x) - x * pdf(x); };
    const auto first = [&](double x) { return std::isinf(x) ? 0.0 : -pdf(x); };
    const auto zeroth = [&](double x) { return std::isinf(x) ? (x > 0 ? 1.0 : 0.0) : cdf(x); };
    return (second(b) - second(a)) - 2.0 * m * (first(b) - first(a)) + m * m * (zeroth(b) - zeroth(a));
  };
  double mse = 0.0;
  for (int k = 0; k < cells; ++k) {
    const double low = k == 0 ? -INFINITY : -clip + k * width;
    const double high = k == cells - 1 ? INFINITY : -clip + (k + 1) * width;
    mse += piece(low, high, -clip + (k + 0.5) * width);
  }
  return mse;
}

// The clip factor that minimises UniformQuantizerMse (golden-section search; the error is unimodal in the clip).
double OptimalClip(int cells) {
  double low = 0.5;
  double high = 8.0;
  const double ratio = (std::sqrt(5.0) - 1.0) / 2.0;
  for (int i = 0; i < 200; ++i) {
    const double a = high - ratio * (high - low);
    const double b = low + ratio * (high - low);
    if (UniformQuantizerMse(cells, a) < UniformQuantizerMse(cells, b)) {
      high = b;
    } else {
      low = a;
    }
  }
  return 0.5 * (low + high);
}

double SinglePassError(const std::vector<float>& values, const BucketLayout& layout, int bits, float clip,
                       size_t bucket) {
  QuantizerConfig config;
  config.bits = bits;
  config.bucketSize = bucket;
  config.clip = clip;
  const Quantizer quantizer(config);
  std::vector<uint32_t> wire(quantizer.WireBytes(layout) / 4 + 1);
  quantizer.Encode(values.data(), nullptr, layout, wire.data());
  std::vector<float> decoded(values.size());
  quantizer.Decode(wire.data(), layout, decoded.data());
  double error = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double difference = static_cast<double>(decoded[i]) - values[i];
    error += difference * difference;
    norm += static_cast<double>(values[i]) * values[i];
  }
  return std::sqrt(error / norm);
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) {
    std::fprintf(stderr, "gradagg_quantizer_error: cannot open %s\n", path.c_str());
    std::exit(2);
  }
  const auto bytes = static_cast<size_t>(file.tellg());
  std::vector<float> values(bytes / sizeof(float));
  file.seekg(0);
  file.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  return values;
}

std::vector<size_t> ParseList(const std::string& text) {
  std::vector<size_t> values;
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) values.push_back(std::stoull(item));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gradientsPath;
  std::vector<size_t> tensors;
  size_t elements = size_t{1} << 22;
  size_t bucket = gradagg::kDefaultBucketSize;
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool hasValue = i + 1 < argc;
    if (flag == "--gradients" && hasValue) {
      gradientsPath = argv[++i];
    } else if (flag == "--tensors" && hasValue) {
      tensors = ParseList(argv[++i]);
    } else if (flag == "--elements" && hasValue) {
      elements = std::stoull(argv[++i]);
    } else if (flag == "--bucket" && hasValue) {
      bucket = std::stoull(argv[++i]);
    } else if (flag == "--seed" && hasValue) {
      seed = static_cast<unsigned>(std::stoul(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: gradagg_quantizer_error [--gradients FILE [--tensors a,b,...]] [--elements N] "
                   "[--bucket B] [--seed S]\n");
      return flag == "--help" ? 0 : 2;
    }
  }

  std::vector<float> gaussian(elements);
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : gaussian) v = normal(generator);
  const BucketLayout gaussianLayout = BucketLayout::Uniform(elements, bucket);
  std::vector<float> gradient;
  BucketLayout gradientLayout;
  if (!gradientsPath.empty()) {
    gradient = ReadFloats(gradientsPath);
    gradientLayout = tensors.empty() ? BucketLayout::Uniform(gradient.size(), bucket) : BucketLayout(tensors, bucket);
    if (gradientLayout.elements() != gradient.size()) {
      std::fprintf(stderr, "gradagg_quantizer_error: --tensors add up to %zu, the file holds %zu floats\n",
                   gradientLayout.elements(), gradient.size());
      return 2;
    }
  }

  std::printf("# single-pass relative L2 error, buckets of %zu, %zu Gaussian values (seed %u)%s\n", bucket, elements,
              seed, gradientsPath.empty() ? "" : (", and " + gradientsPath).c_str());
  std::printf("# optimum: the best uniform quantizer of 2^bits cells on N(0,1) with the variance known\n");
  std::printf("%5s %6s %10s %10s %10s %s\n", "bits", "clip", "gaussian", "optimum", "gradient", "");
  const float clips[] = {1.5f, 1.75f, 2.0f, 2.25f, 2.5f, 2.7f, 3.0f, 3.25f, 3.5f, 3.75f, 4.0f, 4.5f, 5.0f};
  for (int bits : {2, 4, 8}) {
    const int cells = 1 << bits;
    const double bestClip = OptimalClip(cells);
    for (float clip : clips) {
      char onGradient[32] = "-";
      if (!gradient.empty())
        std::snprintf(onGradient, sizeof onGradient, "%.4f",
                      SinglePassError(gradient, gradientLayout, bits, clip, bucket));
      std::printf("%5d %6.2f %10.4f %10.4f %10s %s\n", bits, clip,
                  SinglePassError(gaussian, gaussianLayout, bits, clip, bucket),
                  std::sqrt(UniformQuantizerMse(cells, clip)), onGradient,
                  clip == gradagg::DefaultClip(bits) ? "<- default" : "");
    }
    std::printf("# %d bits: optimal clip %.3f, error %.4f\n", bits, bestClip,
                std::sqrt(UniformQuantizerMse(cells, bestClip)));
  }
  return 0;
}

#include "apps/common/size_sweep.h"

#include "apps/common/byte_size.h"

namespace gradagg::cli {
namespace {

// 1048576 -> "1M": how the defaults are shown.
std::string FormatBytes(uint64_t bytes) {
  const char* suffixes[] = {"", "K", "M", "G"};
  int suffix = 0;
  while (suffix < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++suffix;
  }
  return std::to_string(bytes) + suffixes[suffix];
}

}  // namespace

SweepFlags::SweepFlags(SizeSweep& sweep, boost::program_options::options_description& flags, const std::string& unit)
    : sweep_(sweep), minText_(FormatBytes(sweep.minBytes)), maxText_(FormatBytes(sweep.maxBytes)) {
  namespace po = boost::program_options;
  flags.add_options()("minbytes,b", po::value(&minText_), ("smallest size (" + minText_ + ")").c_str())(
      "maxbytes,e", po::value(&maxText_), ("largest size (" + maxText_ + ")").c_str())(
      "stepfactor,f", po::value(&sweep_.factor), ("size multiplier (" + std::to_string(sweep.factor) + ")").c_str())(
      "iters,n", po::value(&sweep_.iterations),
      ("timed " + unit + " per size (" + std::to_string(sweep.iterations) + ")").c_str())(
      "warmup_iters,w", po::value(&sweep_.warmups),
      ("untimed " + unit + " first (" + std::to_string(sweep.warmups) + ")").c_str());
}

std::string SweepFlags::Parse(int argc, char** argv, const boost::program_options::options_description& flags,
                              boost::program_options::variables_map& values, uint64_t smallestBytes) {
  namespace po = boost::program_options;
  try {
    po::store(po::parse_command_line(argc, argv, flags), values);
    po::notify(values);
  } catch (const po::error& e) {
    return e.what();
  }
  const auto min = ParseByteSize(minText_), max = ParseByteSize(maxText_);
  if (!min || !max || *min < smallestBytes || *max < *min) {
    return "sizes must be like 64K or 256M with " + std::to_string(smallestBytes) + " <= minbytes <= maxbytes";
  }
  if (sweep_.factor < 2) return "stepfactor must be at least 2";
  if (sweep_.iterations < 1 || sweep_.warmups < 0) return "iters >= 1, warmup_iters >= 0";
  sweep_.minBytes = *min;
  sweep_.maxBytes = *max;
  return "";
}

}  // namespace gradagg::cli

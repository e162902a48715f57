#include "apps/gradagg/cli_options.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace gradagg::cli {
namespace {

ParseResult Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "gradagg");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

TEST(ParseByteSize, AcceptsBinarySuffixes) {
  EXPECT_EQ(ParseByteSize("4096"), 4096u);
  EXPECT_EQ(ParseByteSize("1K"), 1024u);
  EXPECT_EQ(ParseByteSize("16M"), 16u << 20);
  EXPECT_EQ(ParseByteSize("2g"), uint64_t{2} << 30);
  EXPECT_EQ(ParseByteSize("64KiB"), 64u << 10);
  EXPECT_EQ(ParseByteSize("8MB"), 8u << 20);
  EXPECT_FALSE(ParseByteSize(""));
  EXPECT_FALSE(ParseByteSize("M"));
  EXPECT_FALSE(ParseByteSize("12X"));
  EXPECT_FALSE(ParseByteSize("-4"));
  EXPECT_FALSE(ParseByteSize("99999999999999999999"));
}

TEST(ParseCommandLine, ReadsTheIssueCommand) {
  const ParseResult r =
      Parse({"--device", "cpu", "--ranks-per-node", "2", "-b", "1K", "-e", "16M", "-f", "4", "--bits", "8", "--check"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.device, Device::kCpu);
  EXPECT_EQ(r.options.minBytes, 1024u);
  EXPECT_EQ(r.options.maxBytes, 16u << 20);
  EXPECT_EQ(r.options.stepFactor, 4u);
  EXPECT_EQ(r.options.aggregator.bits, 8);
  EXPECT_EQ(r.options.aggregator.ranksPerNode, 2);
  EXPECT_TRUE(r.options.check);
}

TEST(ParseCommandLine, FlagsOverrideTheEnvironmentWhichOverridesDefaults) {
  setenv("GRADAGG_BITS", "4", 1);
  setenv("GRADAGG_BUCKET", "256", 1);
  const ParseResult r = Parse({"--bits", "2"});
  unsetenv("GRADAGG_BITS");
  unsetenv("GRADAGG_BUCKET");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.aggregator.bits, 2);
  EXPECT_EQ(r.options.aggregator.bucketSize, 256u);
}

// Phase 2's piece size: the flag over the environment over the 1M default; 0 means one piece; a bad one is named.
TEST(ParseCommandLine, PieceSizeFromTheFlagTheEnvironmentOrTheDefault) {
  EXPECT_EQ(Parse({}).options.aggregator.pieceBytes, 1u << 20);
  setenv("GRADAGG_PIECE", "65536", 1);
  EXPECT_EQ(Parse({}).options.aggregator.pieceBytes, 65536u);
  EXPECT_EQ(Parse({"--piece", "0"}).options.aggregator.pieceBytes, 0u);
  EXPECT_EQ(Parse({"--piece", "256K"}).options.aggregator.pieceBytes, 256u << 10);
  setenv("GRADAGG_PIECE", "-1", 1);
  EXPECT_NE(Parse({}).error.find("GRADAGG_PIECE=-1"), std::string::npos);
  unsetenv("GRADAGG_PIECE");
  EXPECT_NE(Parse({"--piece", "big"}).error.find("--piece big"), std::string::npos);
}

TEST(ParseCommandLine, NamesWhatIsWrong) {
  EXPECT_NE(Parse({"--bits", "3"}).error.find("bits"), std::string::npos);
  EXPECT_NE(Parse({"-b", "1Q"}).error.find("minbytes"), std::string::npos);
  EXPECT_NE(Parse({"-b", "6"}).error.find("float32"), std::string::npos);
  EXPECT_NE(Parse({"-b", "16M", "-e", "1M"}).error.find("larger"), std::string::npos);
  EXPECT_NE(Parse({"--device", "tpu"}).error.find("tpu"), std::string::npos);
  EXPECT_NE(Parse({"--frobnicate"}).error.find("frobnicate"), std::string::npos);
  EXPECT_NE(Parse({"-n", "0"}).error.find("iters"), std::string::npos);
  EXPECT_NE(Parse({"--bucket", "0"}).error.find("bucket"), std::string::npos);
  setenv("GRADAGG_BITS", "one", 1);
  EXPECT_NE(Parse({}).error.find("GRADAGG_BITS"), std::string::npos);
  unsetenv("GRADAGG_BITS");
  setenv("GRADAGG_DOUBLE_BUFFERED", "1", 1);
  EXPECT_NE(Parse({}).error.find("GRADAGG_DOUBLE_BUFFERED is for trainers"), std::string::npos);
  setenv("GRADAGG_DOUBLE_BUFFERED", "maybe", 1);
  EXPECT_NE(Parse({}).error.find("GRADAGG_DOUBLE_BUFFERED=maybe"), std::string::npos);
  unsetenv("GRADAGG_DOUBLE_BUFFERED");
}

TEST(ParseCommandLine, HelpListsTheFlags) {
  const ParseResult r = Parse({"--help"});
  EXPECT_TRUE(r.showHelp);
  for (const char* flag : {"--minbytes", "--bits", "--check", "--ranks-per-node", "--json", "--device"}) {
    EXPECT_NE(r.helpText.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace gradagg::cli

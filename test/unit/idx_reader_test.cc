// The IDX reader on files made here: plain and gzipped, and every way a file can be wrong.
#include "idx_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace gradagg::train {
namespace {

std::vector<unsigned char> BigEndian(uint32_t value) {
  return {static_cast<unsigned char>(value >> 24), static_cast<unsigned char>(value >> 16),
          static_cast<unsigned char>(value >> 8), static_cast<unsigned char>(value)};
}

std::vector<unsigned char> ImageFile(uint32_t count, uint32_t rows, uint32_t cols) {
  std::vector<unsigned char> bytes;
  for (uint32_t field : {0x00000803u, count, rows, cols}) {
    const auto b = BigEndian(field);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  for (uint32_t i = 0; i < count * rows * cols; ++i) bytes.push_back(static_cast<unsigned char>(i * 7));
  return bytes;
}

class IdxReader : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::vector<unsigned char>& bytes, bool gzip = false) {
    const std::string path = ::testing::TempDir() + "idx_" + name;
    if (gzip) {
      gzFile file = gzopen(path.c_str(), "wb");
      gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(file);
    } else {
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  std::vector<std::string> paths_;
};

void ExpectFailure(const std::function<void()>& read, const std::string& fragment) {
  try {
    read();
    ADD_FAILURE() << "no exception; expected one saying '" << fragment << "'";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST_F(IdxReader, ReadsPlainAndGzippedImagesAlike) {
  const auto bytes = ImageFile(3, 2, 2);
  for (bool gzip : {false, true}) {
    const IdxImages images = ReadIdxImages(Write(gzip ? "images.gz" : "images", bytes, gzip));
    EXPECT_EQ(images.count, 3u);
    EXPECT_EQ(images.rows, 2u);
    EXPECT_EQ(images.cols, 2u);
    ASSERT_EQ(images.pixels.size(), 12u);
    EXPECT_EQ(images.pixels[5], 35);
  }
}

TEST_F(IdxReader, ReadsLabels) {
  std::vector<unsigned char> bytes = BigEndian(0x00000801);
  const auto count = BigEndian(4);
  bytes.insert(bytes.end(), count.begin(), count.end());
  bytes.insert(bytes.end(), {9, 0, 3, 7});
  EXPECT_EQ(ReadIdxLabels(Write("labels", bytes)), (std::vector<uint8_t>{9, 0, 3, 7}));
}

TEST_F(IdxReader, SaysWhenPixelsAreMissing) {
  auto bytes = ImageFile(3, 2, 2);
  bytes.resize(bytes.size() - 5);
  ExpectFailure([&] { ReadIdxImages(Write("short", bytes)); }, "truncated: the pixels needs 12 bytes, the file has 7");
  ExpectFailure([&] { ReadIdxImages(Write("short.gz", bytes, true)); }, "truncated");
  ExpectFailure([&] { ReadIdxImages(Write("header", {0, 0, 8, 3, 0})); }, "truncated");
}

TEST_F(IdxReader, RefusesOtherFiles) {
  auto labels = BigEndian(0x00000801);
  labels.resize(8, 0);
  ExpectFailure([&] { ReadIdxImages(Write("labels-as-images", labels)); }, "not an IDX image file (magic 0x00000801");
  ExpectFailure([&] { ReadIdxLabels(Write("images-as-labels", ImageFile(1, 1, 1))); }, "not an IDX label file");
  ExpectFailure([&] { ReadIdxImages(Write("huge", ImageFile(0, 100000, 1))); }, "implausible image size");
  ExpectFailure([&] { ReadIdxImages(::testing::TempDir() + "idx_missing"); }, "cannot open");
}

TEST_F(IdxReader, SaysWhenCompressedDataIsCorrupt) {
  std::vector<unsigned char> bytes = ImageFile(50, 8, 8);
  const std::string path = Write("corrupt.gz", bytes, true);
  std::vector<unsigned char> packed;
  {
    std::ifstream in(path, std::ios::binary);
    packed.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t i = 20; i + 10 < packed.size(); i += 3) packed[i] ^= 0x5a;  // damage the deflate stream
  ExpectFailure([&] { ReadIdxImages(Write("corrupt.gz", packed)); }, "corrupt data");
}

TEST_F(IdxReader, FindsPlainOrGzippedFilesAndNamesBothWhenNeither) {
  const std::string directory = ::testing::TempDir();
  Write("present.gz", {1});
  EXPECT_EQ(FindIdxFile(directory, "idx_present"), directory + "/idx_present.gz");
  ExpectFailure([&] { FindIdxFile(directory, "idx_absent"); }, "idx_absent.gz");
}

}  // namespace
}  // namespace gradagg::train

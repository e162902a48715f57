#include "idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace gradagg::train {
namespace {

constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kMaxSide = 4096;

struct GzClose {
  void operator()(gzFile file) const noexcept { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("IDX file " + path + ": " + what);
}

GzFile Open(const std::string& path) {
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) Fail(path, std::string("cannot open: ") + std::strerror(errno));
  return file;
}

// Reads exactly `bytes` bytes or says how many there were.
void ReadExactly(gzFile file, const std::string& path, void* out, size_t bytes, const char* what) {
  auto* at = static_cast<unsigned char*>(out);
  size_t done = 0;
  while (done < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - done, 1u << 30));
    const int got = gzread(file, at + done, chunk);
    if (got < 0) {
      int code = 0;
      Fail(path, std::string("corrupt data while reading ") + what + ": " + gzerror(file, &code));
    }
    if (got == 0) {
      Fail(path, std::string("truncated: ") + what + " needs " + std::to_string(bytes) + " bytes, the file has " +
                     std::to_string(done));
    }
    done += static_cast<size_t>(got);
  }
}

uint32_t ReadBigEndian(gzFile file, const std::string& path, const char* what) {
  unsigned char bytes[4];
  ReadExactly(file, path, bytes, sizeof bytes, what);
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
}

void ExpectMagic(gzFile file, const std::string& path, uint32_t expected) {
  const uint32_t magic = ReadBigEndian(file, path, "the magic number");
  if (magic != expected) {
    char text[96];
    std::snprintf(text, sizeof text, "not an IDX %s file (magic 0x%08x, expected 0x%08x)",
                  expected == kImagesMagic ? "image" : "label", magic, expected);
    Fail(path, text);
  }
}

}  // namespace

IdxImages ReadIdxImages(const std::string& path) {
  const GzFile file = Open(path);
  ExpectMagic(file.get(), path, kImagesMagic);
  IdxImages images;
  images.count = ReadBigEndian(file.get(), path, "the image count");
  images.rows = ReadBigEndian(file.get(), path, "the row count");
  images.cols = ReadBigEndian(file.get(), path, "the column count");
  if (images.rows == 0 || images.cols == 0 || images.rows > kMaxSide || images.cols > kMaxSide) {
    Fail(path, "implausible image size " + std::to_string(images.rows) + " x " + std::to_string(images.cols));
  }
  images.pixels.resize(size_t{images.count} * images.rows * images.cols);
  ReadExactly(file.get(), path, images.pixels.data(), images.pixels.size(), "the pixels");
  return images;
}

std::vector<uint8_t> ReadIdxLabels(const std::string& path) {
  const GzFile file = Open(path);
  ExpectMagic(file.get(), path, kLabelsMagic);
  std::vector<uint8_t> labels(ReadBigEndian(file.get(), path, "the label count"));
  ReadExactly(file.get(), path, labels.data(), labels.size(), "the labels");
  return labels;
}

std::string FindIdxFile(const std::string& directory, const std::string& name) {
  struct stat info {};
  const std::string plain = directory + "/" + name;
  if (stat(plain.c_str(), &info) == 0) return plain;
  if (stat((plain + ".gz").c_str(), &info) == 0) return plain + ".gz";
  throw std::runtime_error("Fashion-MNIST file not found: neither " + plain + " nor " + plain +
                           ".gz (apt-get install dataset-fashion-mnist, or pass --data DIR)");
}

}  // namespace gradagg::train

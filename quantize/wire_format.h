// The wire format of quantized gradients, and the sizes that follow from it.
//
// A gradient is cut into buckets of B consecutive elements, each tensor from its own start (its last bucket may be
// short; bucket_layout.h). A quantized run of buckets is the concatenation of its buckets, each encoded as:
//
//   bits 1, 2, 4, 8:  float32 first | float32 second | ceil(len * bits / 32) uint32 code words
//   bits 32:          len raw float32 values (no header: there is nothing to decode)
//
//   - bits 1:  first, second = the values that bit 0 and bit 1 decode to.
//   - bits 2-8: first, second = lower, upper ends of the clipping range [-c*s, +c*s]; with L = 2^bits cells of
//     width (upper - lower) / L, code k decodes to lower + (k + 0.5) * (upper - lower) / L, the midpoint of cell k
//     (so every value lies inside the range), or to 0 where upper - lower < 1e-36.
//   - a non-finite bucket (its input held a NaN or Inf): first and/or second are not finite, every code is 0, and
//     every element decodes to first + second.
//   - Element e of the bucket holds bits [(e % per_word) * bits, ...) of word e / per_word, per_word = 32 / bits,
//     least significant first; unused high bits of the last word are zero.
//   - Everything is native little-endian; every bucket is a whole number of 32-bit words, so a run of buckets
//     starting on a 4-byte boundary keeps every field aligned.
//
// A message's size follows from (elements, B, bits) alone, so every receive can be checked against it.
#pragma once

#include <cstddef>

namespace gradagg {

inline constexpr int kRawBits = 32;
inline constexpr size_t kBucketHeaderBytes = 2 * sizeof(float);
inline constexpr size_t kCodeWordBytes = 4;

// Bytes of one encoded bucket of `length` elements.
constexpr size_t BucketWireBytes(size_t length, int bits) {
  if (bits == kRawBits) return length * sizeof(float);
  return kBucketHeaderBytes + kCodeWordBytes * ((length * static_cast<size_t>(bits) + 31) / 32);
}

// Bytes of `elements` consecutive elements of one segment that start on a bucket boundary (only the last bucket may
// be short).
constexpr size_t WireBytes(size_t elements, size_t bucketSize, int bits) {
  const size_t fullBuckets = elements / bucketSize;
  const size_t tail = elements % bucketSize;
  return fullBuckets * BucketWireBytes(bucketSize, bits) + (tail != 0 ? BucketWireBytes(tail, bits) : 0);
}

}  // namespace gradagg

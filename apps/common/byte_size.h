// Sizes on the command line of the CLI and the benchmarks beside it: "4096", "64K", "1MiB", "2G".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gradagg::cli {

// Bytes, with an optional K, M or G suffix (powers of 1024; "KiB", "KB" and "k" read the same), or nullopt for
// anything else or a value above 2^62.
std::optional<uint64_t> ParseByteSize(const std::string& text);

}  // namespace gradagg::cli

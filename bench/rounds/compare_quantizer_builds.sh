#!/usr/bin/env bash
# Times two builds of the quantizer benchmarks in one run, interleaved (before, after, before, after, ...), so that
# clock and thermal drift fall on both alike, and prints each benchmark's median GB/s per build and the ratio.
#
#   bench/rounds/compare_quantizer_builds.sh BEFORE_DIR AFTER_DIR OUT_FILE [cpu|cuda] [ROUNDS]
#
# CPU rows are Google Benchmark's bytes per second; CUDA rows the benchmark's event-timed GB/s of float32 input.
# Each DIR holds gradagg_quantize_benchmark (cpu) or gradagg_cuda_quantize_benchmark (cuda), and for the latter
# Google Benchmark's shared library where the machine lacks it. Defaults: cuda, 3 rounds. CPU sizes: ELEMENTS, a
# regex of element counts (default 4194304; 67108864 runs from DRAM).
set -euo pipefail
trap 'echo "compare_quantizer_builds: failed; see $out.*.log" >&2' ERR
before=$(cd "$1" && pwd) after=$(cd "$2" && pwd) out=$3 kind=${4:-cuda} rounds=${5:-3}
case "$kind" in
  cpu) binary=gradagg_quantize_benchmark
    filter="(Encode|DecodeAccumulate)/bits:(1|2|4|8)/elements:(${ELEMENTS:-4194304})\$" ;;
  cuda) binary=gradagg_cuda_quantize_benchmark
    filter='(Encode|DecodeAccumulate)/bytes:(67108864|268435456)/bits:(1|2|4|8)/(bf16:0/)?manual_time' ;;
  *) echo "usage: $0 BEFORE_DIR AFTER_DIR OUT_FILE [cpu|cuda] [ROUNDS]" >&2; exit 2 ;;
esac
: >"$out"
for (( round = 1; round <= rounds; round++ )); do
  for build in before after; do
    dir=$before
    [ "$build" = after ] && dir=$after
    LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}" "$dir/$binary" --benchmark_filter="$filter" \
      --benchmark_min_time=0.2 --benchmark_format=csv 2>"$out.$build.log" |
      awk -F, -v build="$build" 'NR > 1 && $1 ~ /^"/ {
        name = $1; gsub(/"/, "", name)
        rate = ""  # the GB/s counter where there is one (CUDA: event-timed), else bytes per second
        for (i = 1; i <= NF; i++) if (header[i] == "\"GB/s\"" || header[i] == "GB/s") rate = $i
        if (rate == "") for (i = 1; i <= NF; i++) if (header[i] == "bytes_per_second") rate = $i / 1e9
        print build, name, rate
      } NR == 1 { for (i = 1; i <= NF; i++) header[i] = $i }' >>"$out"
  done
done
# Median per (build, benchmark), then after / before.
python3 - "$out" "$kind" "$rounds" <<'EOF'
import collections, statistics, sys
path, kind, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
rates = collections.defaultdict(list)
for line in open(path):
    build, name, rate = line.split()
    rates[(build, name)].append(float(rate))
names = sorted({name for _, name in rates})
print(f"# {kind} quantizer, median of {rounds} interleaved rounds, GB/s of float32 input")
print(f"{'benchmark':60s} {'before':>9s} {'after':>9s} {'after/before':>12s}")
for name in names:
    b, a = statistics.median(rates[("before", name)]), statistics.median(rates[("after", name)])
    print(f"{name:60s} {b:9.2f} {a:9.2f} {a / b:12.3f}")
EOF

#!/bin/sh
# CTest wrapper: runs the CLI on an emulated cluster (scripts/emulated_cluster.sh) and checks its output with
# expect_run.sh; exits 77 (CTest: skipped) where the cluster cannot be built: not root, or no ip/tc/unshare.
#   emulated_cluster_test.sh LAST_LINE_REGEX OUTPUT_REGEX CLUSTER_OPTIONS... -- MPIRUN_ARGUMENTS...
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ]; then echo "skipped: the emulated cluster needs root"; exit 77; fi
for tool in ip tc unshare; do
  command -v "$tool" >/dev/null 2>&1 || { echo "skipped: '$tool' not found"; exit 77; }
done
if ! ip netns add gaemuprobe 2>/dev/null; then echo "skipped: cannot create network namespaces here"; exit 77; fi
ip netns del gaemuprobe
last=$1 output=$2
shift 2
exec "$here/expect_run.sh" 0 "$last" "$output" -- "$here/../../scripts/emulated_cluster.sh" "$@"

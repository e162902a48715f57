#!/bin/sh
# CTest's entry: the SLURM template, srun and salloc on a throwaway 2-node SLURM cluster whose links are shaped to
# 1 Gbit/s (scripts/slurm_test_cluster.sh; the jobs are test/slurm/slurm_jobs.sh). Exits 77 (skipped) without root,
# iproute2 or Debian's slurm-wlm and munge (scripts/install_deps.sh installs them).
#   slurm_template_test.sh GRADAGG_BINARY OUT_DIR PYTHON_WITH_MATPLOTLIB
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
PATH=$PATH:/usr/sbin:/sbin
for tool in ip slurmctld slurmd munged sbatch; do
  command -v "$tool" >/dev/null 2>&1 || { echo "skipped: '$tool' not found"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root"; exit 77; }
rm -rf "$2"
mkdir -p "$2"
exec "$root/scripts/slurm_test_cluster.sh" --nodes 2 --cpus 2 --rate 1gbit --prefix gaslci --subnet 10.78.9 \
  --logs "$2/logs" -- "$root/test/slurm/slurm_jobs.sh" "$1" "$2" "$3"

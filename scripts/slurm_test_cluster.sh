#!/usr/bin/env bash
# A throwaway SLURM cluster on one Linux host, for tests: N nodes as network namespaces (scripts/emulated_network.sh:
# each its own hostname, address and optionally shaped link), one slurmd per node, slurmctld and munged (a key of
# its own) in node 0, and every configuration, state and log file in one temporary folder. Runs COMMAND in node 0
# with SLURM_CONF set, so sbatch, srun, squeue and scontrol reach this cluster, then always stops and removes it
# (also on failure or Ctrl-C). The nodes share this host's file system; each has a TmpFS folder of its own. Jobs see
# the Open MPI settings of this network (OMPI_MCA_*_if_include, ranks that yield), as a site's environment would set
# them.
#
#   scripts/slurm_test_cluster.sh [options] -- COMMAND...
#   scripts/slurm_test_cluster.sh --nodes 2 --rate 1gbit -- sbatch --wait --nodes=2 scripts/slurm_scaling.sbatch
#
# Options:
#   --nodes N      nodes (default 2): node0 .. node(N-1), one partition "emulated" holding all
#   --cpus C       CPUs each node offers (default: this host's cores)
#   --rate RATE    each node's link rate in both directions, tc syntax (1gbit, 100mbit); default unshaped
#   --delay DELAY  one-way delay on each node's link, tc syntax (needs tc's netem); default none
#   --prefix NAME  names of the namespaces and links (default gaslurm); a leftover cluster of that name is removed
#   --subnet A.B.C the /24 the nodes live on (default 10.78.0; node i is A.B.C.(i+1))
#   --logs DIR     copy the daemons' logs into DIR when the cluster stops
#   --wait SECONDS how long to wait for every node to come up (default 60)
# Needs root, Debian's slurm-wlm and munge (slurmctld, slurmd, munged), iproute2 and util-linux. Exit status:
# COMMAND's; 2 for bad options or a cluster that did not come up.
set -euo pipefail

nodes=2 cpus=$(nproc) rate="" delay="" prefix=gaslurm subnet=10.78.0 logs="" wait_s=60
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "slurm_test_cluster: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --subnet) subnet=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --wait) wait_s=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
done
[ $# -gt 0 ] || die "nothing to run: give a command after -- (try --help)"
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] && [ "$nodes" -le 250 ] || die "--nodes must be 1 to 250, not '$nodes'"
[[ "$cpus" =~ ^[1-9][0-9]*$ ]] || die "--cpus must be a positive integer, not '$cpus'"
[[ "$wait_s" =~ ^[1-9][0-9]*$ ]] || die "--wait must be a positive number of seconds, not '$wait_s'"
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--prefix must be 1-8 lower-case letters and digits, not '$prefix'"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, the daemons); run as root or with sudo"
for tool in ip tc unshare slurmctld slurmd munged sinfo; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "'$tool' not found (apt-get install slurm-wlm munge iproute2 util-linux; PATH needs /usr/sbin)"
done

. "$(dirname "$0")/emulated_network.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/$prefix-slurm.XXXXXX")
chmod 711 "$dir"  # munged wants every directory above its socket searchable by all
teardown() {
  [ -z "$logs" ] || { mkdir -p "$logs" && cp "$dir"/*.log "$logs/" 2>/dev/null || true; }
  emulated_network_down "$prefix"
  rm -rf "$dir"
}
child=""
trap teardown EXIT
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 130' INT TERM

emulated_network_up "$prefix" "$subnet" "$nodes" "$rate" "$delay"

# munged, with a key of its own and its socket in the folder; every daemon and client finds it through AuthInfo.
head -c 1024 /dev/urandom >"$dir/munge.key"
chmod 400 "$dir/munge.key"
emulated_network_in 0 munged --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" --origin="$subnet.1"

mkdir -p "$dir/state"
for ((i = 0; i < nodes; i++)); do mkdir -p "$dir/spool/node$i" "$dir/tmp/node$i"; done
{
  echo "ClusterName=$prefix"
  echo "SlurmctldHost=node0($subnet.1)"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$dir/munge.socket"
  echo "CredType=cred/munge"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "StateSaveLocation=$dir/state"
  echo "SlurmdSpoolDir=$dir/spool/%n"
  echo "TmpFS=$dir/tmp/%n"  # per node: PMIx keeps a folder per step there, named alike on every node
  echo "SlurmctldPidFile=$dir/slurmctld.pid"
  echo "SlurmdPidFile=$dir/slurmd.%n.pid"
  echo "SlurmctldLogFile=$dir/slurmctld.log"
  echo "SlurmdLogFile=$dir/slurmd.%n.log"
  echo "SlurmdParameters=config_overrides"  # the nodes share this host's cores: trust the configuration
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "SchedulerType=sched/builtin"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  echo "MpiDefault=none"
  echo "ReturnToService=2"
  echo "MinJobAge=3600"
  echo "KillWait=5"
  for ((i = 0; i < nodes; i++)); do
    echo "NodeName=node$i NodeAddr=$subnet.$((i + 1)) CPUs=$cpus State=UNKNOWN"
  done
  echo "PartitionName=emulated Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"

emulated_network_in 0 slurmctld -i
for ((i = 0; i < nodes; i++)); do
  emulated_network_in "$i" slurmd -N "node$i"
done

# Every node idle, or give up with the daemons' own words.
in_node0() { emulated_network_in 0 "$@"; }
deadline=$((SECONDS + wait_s))
until [ "$(in_node0 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq "$nodes" ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "slurm_test_cluster: the nodes did not all come up within ${wait_s} s:" >&2
    in_node0 sinfo -N >&2 || true
    tail -n 5 "$dir"/*.log >&2 || true
    exit 2
  fi
  sleep 1
done
echo "# SLURM test cluster: $nodes nodes x $cpus CPUs on $subnet.0/24," \
  "link ${rate:-unshaped}${delay:+, delay $delay}" >&2

export OMPI_MCA_btl_tcp_if_include="$subnet.0/24" OMPI_MCA_oob_tcp_if_include="$subnet.0/24" \
  OMPI_MCA_mpi_yield_when_idle=1
emulated_network_in 0 "$@" &
child=$!
status=0
wait "$child" || status=$?
exit $status

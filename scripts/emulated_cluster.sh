#!/usr/bin/env bash
# An emulated cluster on one Linux host: N "nodes" as network namespaces joined by a bridge, each with its own
# hostname (so Open MPI sees N nodes), its link optionally shaped with tc, and an rsh agent that mpirun uses instead
# of ssh. Starts the cluster, runs mpirun in node 0, and always tears everything down (also on failure or Ctrl-C).
#
#   scripts/emulated_cluster.sh [options] -- MPIRUN_ARGUMENTS...
#   scripts/emulated_cluster.sh --nodes 4 --slots 1 --rate 1gbit -- -np 4 build/bin/gradagg --size 64M --check
#
# Options:
#   --nodes N      nodes (default 2)
#   --slots S      ranks per node in the generated hostfile (default 2)
#   --rate RATE    each node's link rate in both directions, tc syntax (1gbit, 10gbit, 500mbit); default unshaped
#   --delay DELAY  one-way delay added on each node's link, tc syntax (e.g. 1ms); default none
#   --prefix NAME  names of the namespaces and links (default gaemu); a leftover cluster of that name is removed
#   --subnet A.B.C the /24 the nodes live on (default 10.77.0; node i is A.B.C.(i+1))
#   --keep-hostfile FILE  also write the hostfile to FILE
#   --wire-bytes FILE     after the run, write each node's bytes sent and received on its link (its interface's
#                         counters: every protocol's headers and every process's traffic included) to FILE
# Waiting ranks yield the CPU (mpi_yield_when_idle): the emulated nodes share this host's few cores.
# mpirun launches through the agent (plm rsh) whatever the environment selects: OMPI_MCA_plm=isolated, as on the
# GPU machine, would otherwise fail for want of slots, or with --oversubscribe put every rank on node 0.
# Needs root, iproute2 (ip, tc), util-linux (unshare) and Open MPI's mpirun. Exit status: mpirun's.
set -euo pipefail

nodes=2 slots=2 rate="" delay="" prefix=gaemu subnet=10.77.0 keep_hostfile="" wire_bytes=""
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "emulated_cluster: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --subnet) subnet=$2; shift 2 ;;
    --keep-hostfile) keep_hostfile=$2; shift 2 ;;
    --wire-bytes) wire_bytes=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
done
[ $# -gt 0 ] || die "nothing to run: give mpirun's arguments after -- (try --help)"
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] && [ "$nodes" -le 250 ] || die "--nodes must be 1 to 250, not '$nodes'"
[[ "$slots" =~ ^[1-9][0-9]*$ ]] || die "--slots must be a positive integer, not '$slots'"
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--prefix must be 1-8 lower-case letters and digits, not '$prefix'"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, tc); run as root or with sudo"
for tool in ip tc unshare mpirun; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (apt-get install iproute2 util-linux openmpi-bin)"
done

. "$(dirname "$0")/emulated_network.sh"
workdir=$(mktemp -d "/tmp/$prefix-cluster.XXXXXX")
teardown() { emulated_network_down "$prefix"; rm -rf "$workdir"; }
child=""
trap teardown EXIT
# mpirun runs in the background and the script waits for it, so a signal is handled at once (bash would defer it
# until a foreground child ends); teardown then kills whatever still runs in the namespaces.
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 130' INT TERM

# 1. The nodes: one namespace each, on a bridge (scripts/emulated_network.sh).
emulated_network_up "$prefix" "$subnet" "$nodes" "$rate" "$delay"  # exits 2 (set -e) where a delay cannot be had
for ((i = 0; i < nodes; i++)); do echo "node$i slots=$slots" >>"$workdir/hostfile"; done
[ -z "$keep_hostfile" ] || cp "$workdir/hostfile" "$keep_hostfile"

# 2. The rsh agent: mpirun calls it as `agent [options] nodeK command...`; it runs the command in node K's
#    namespace under that node's hostname, as ssh would run it on that host.
cat >"$workdir/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec "$prefix-n\${host#node}" unshare --uts sh -c "hostname \$host; \$*"
AGENT
chmod +x "$workdir/agent"

# 3. mpirun inside node 0, as node0.
echo "# emulated cluster: $nodes nodes x $slots slots on $subnet.0/24, link ${rate:-unshaped}${delay:+, delay $delay}" >&2
emulated_network_in 0 \
  mpirun --allow-run-as-root --hostfile "$workdir/hostfile" \
  --mca plm rsh --mca plm_rsh_agent "$workdir/agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca mpi_yield_when_idle 1 --mca btl tcp,self,vader --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" \
  "$@" &
child=$!
status=0
wait "$child" || status=$?
if [ -n "$wire_bytes" ]; then  # the counters of each node's end of its link, before teardown removes them
  echo "node tx_bytes rx_bytes" >"$wire_bytes"
  for ((i = 0; i < nodes; i++)); do
    echo "node$i $(ip netns exec "$prefix-n$i" cat /sys/class/net/eth0/statistics/tx_bytes \
      /sys/class/net/eth0/statistics/rx_bytes | xargs)" >>"$wire_bytes"
  done
fi
exit $status

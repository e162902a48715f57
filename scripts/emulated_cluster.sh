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
# Waiting ranks yield the CPU (mpi_yield_when_idle): the emulated nodes share this host's few cores.
# Needs root, iproute2 (ip, tc), util-linux (unshare) and Open MPI's mpirun. Exit status: mpirun's.
set -euo pipefail

nodes=2 slots=2 rate="" delay="" prefix=gaemu subnet=10.77.0 keep_hostfile=""
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
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

switch="$prefix-sw"
workdir=$(mktemp -d "/tmp/$prefix-cluster.XXXXXX")
node_ns() { echo "$prefix-n$1"; }

teardown() {
  local ns namespaces signal
  namespaces=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(sw|n[0-9]+)$" || true)
  for signal in TERM KILL; do  # ask first, then insist
    for ns in $namespaces; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -"$signal" 2>/dev/null || true; done
    [ "$signal" = KILL ] || [ -z "$namespaces" ] || sleep 1
  done
  for ns in $namespaces; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$workdir"
}
child=""
trap teardown EXIT
# mpirun runs in the background and the script waits for it, so a signal is handled at once (bash would defer it
# until a foreground child ends); teardown then kills whatever still runs in the namespaces.
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 130' INT TERM

# Shapes one direction of a link: netem for the delay, tbf under it for the rate.
shape() {  # shape NAMESPACE DEVICE
  local ns=$1 dev=$2
  if [ -n "$delay" ] && [ -n "$rate" ]; then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000
    tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$rate" burst 256kb latency 100ms
  elif [ -n "$delay" ]; then
    tc -n "$ns" qdisc add dev "$dev" root netem delay "$delay" limit 100000
  elif [ -n "$rate" ]; then
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 256kb latency 100ms
  fi
}

# Delay needs the netem qdisc (kernel module sch_netem), which some kernels and containers lack: ask first.
if [ -n "$delay" ]; then
  ip netns add "$prefix-n0"
  tc -n "$prefix-n0" qdisc add dev lo root netem delay "$delay" 2>/dev/null ||
    die "--delay needs tc's netem qdisc (kernel module sch_netem), which this kernel does not offer; use --rate alone"
  ip netns del "$prefix-n0"
fi

# 1. The switch: a bridge in a namespace of its own; then one namespace per node, on a veth pair to the bridge.
teardown_leftovers() { local keep=$workdir; workdir=/nonexistent; teardown; workdir=$keep; }
teardown_leftovers
ip netns add "$switch"
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
for ((i = 0; i < nodes; i++)); do
  ns=$(node_ns "$i")
  ip netns add "$ns"
  ip link add "${prefix}v$i" type veth peer name "${prefix}p$i"
  ip link set "${prefix}v$i" netns "$ns"
  ip link set "${prefix}p$i" netns "$switch"
  ip -n "$ns" link set "${prefix}v$i" name eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$switch" link set "${prefix}p$i" master br0 up
  shape "$ns" eth0               # node -> switch
  shape "$switch" "${prefix}p$i"  # switch -> node
  echo "node$i slots=$slots" >>"$workdir/hostfile"
done
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
ip netns exec "$(node_ns 0)" unshare --uts sh -c 'hostname node0 && exec "$@"' sh \
  mpirun --allow-run-as-root --hostfile "$workdir/hostfile" \
  --mca plm_rsh_agent "$workdir/agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca mpi_yield_when_idle 1 --mca btl tcp,self,vader --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" \
  "$@" &
child=$!
status=0
wait "$child" || status=$?
exit $status

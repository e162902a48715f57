# shellcheck shell=bash
# Sourced by emulated_cluster.sh and slurm_test_cluster.sh: N "nodes" of one Linux host as network namespaces
# PREFIX-n0 .. PREFIX-n(N-1) on a bridge in namespace PREFIX-sw, node i at SUBNET.(i+1)/24, each link optionally
# shaped with tc in both directions. Needs root, iproute2 (ip, tc) and util-linux (unshare, nsenter).
#
#   emulated_network_up PREFIX SUBNET NODES RATE DELAY    # RATE, DELAY: tc syntax, or "" for none
#   emulated_network_in NODE COMMAND...                   # runs COMMAND in node NODE's namespace as host nodeNODE
#   emulated_network_down PREFIX                          # kills what runs in the namespaces, removes them

# Shapes one direction of a link: netem for the delay, tbf under it for the rate.
emulated_network_shape() {  # NAMESPACE DEVICE RATE DELAY
  local ns=$1 dev=$2 rate=$3 delay=$4
  if [ -n "$delay" ] && [ -n "$rate" ]; then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000
    tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$rate" burst 256kb latency 100ms
  elif [ -n "$delay" ]; then
    tc -n "$ns" qdisc add dev "$dev" root netem delay "$delay" limit 100000
  elif [ -n "$rate" ]; then
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 256kb latency 100ms
  fi
}

emulated_network_down() {  # PREFIX
  local prefix=$1 ns namespaces signal
  namespaces=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(sw|n[0-9]+)$" || true)
  for signal in TERM KILL; do  # ask first, then insist
    for ns in $namespaces; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -"$signal" 2>/dev/null || true; done
    [ "$signal" = KILL ] || [ -z "$namespaces" ] || sleep 1
  done
  for ns in $namespaces; do ip netns del "$ns" 2>/dev/null || true; done
}

emulated_network_up() {  # PREFIX SUBNET NODES RATE DELAY
  local prefix=$1 subnet=$2 nodes=$3 rate=$4 delay=$5 i ns switch="$1-sw"
  EMULATED_NETWORK_PREFIX=$prefix
  # Delay needs the netem qdisc (kernel module sch_netem), which some kernels and containers lack: ask first.
  if [ -n "$delay" ]; then
    ip netns add "$prefix-n0"
    if ! tc -n "$prefix-n0" qdisc add dev lo root netem delay "$delay" 2>/dev/null; then
      ip netns del "$prefix-n0"
      echo "emulated network: a delay needs tc's netem qdisc (kernel module sch_netem), which this kernel does not" \
        "offer; use a rate alone" >&2
      return 2
    fi
    ip netns del "$prefix-n0"
  fi
  emulated_network_down "$prefix"  # a leftover of the same name
  ip netns add "$switch"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  for ((i = 0; i < nodes; i++)); do
    ns="$prefix-n$i"
    ip netns add "$ns"
    ip link add "${prefix}v$i" type veth peer name "${prefix}p$i"
    ip link set "${prefix}v$i" netns "$ns"
    ip link set "${prefix}p$i" netns "$switch"
    ip -n "$ns" link set "${prefix}v$i" name eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$switch" link set "${prefix}p$i" master br0 up
    emulated_network_shape "$ns" eth0 "$rate" "$delay"               # node -> switch
    emulated_network_shape "$switch" "${prefix}p$i" "$rate" "$delay"  # switch -> node
  done
}

emulated_network_in() {  # NODE COMMAND...
  local node=$1
  shift
  # nsenter, not `ip netns exec`: that remounts /sys, and with it the cgroup mounts that slurmd needs.
  nsenter --net="/run/netns/$EMULATED_NETWORK_PREFIX-n$node" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
    "node$node" "$@"
}

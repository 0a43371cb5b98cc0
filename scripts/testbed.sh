#!/usr/bin/env bash
# Builds (up) or removes (down) quench's veth testbed: N sender namespaces and M receiver
# namespaces, each joined to one switch namespace by a veth pair.
#
#   scripts/testbed.sh up   [--senders N] [--receivers M] [--prefix P]
#   scripts/testbed.sh down [--prefix P]
#   scripts/testbed.sh show [--prefix P]
#
# Names (prefix P, default "qn"; tests pass their own so runs never collide):
#   namespaces  P-sw, P-s0..P-s{N-1}, P-r0..P-r{M-1}
#   links       in P-sI / P-rJ: "eth0"; in P-sw: P-sw-sI / P-sw-rJ (the switch ports)
#   MACs        sender I 02:71:6e:01:00:0I, receiver J 02:71:6e:02:00:0J
#   addresses   10.71.0.(1+I)/24 senders, 10.71.0.(101+J)/24 receivers (inside the namespaces)
# `up` is idempotent (creates only what is missing); `down` removes every namespace with the
# prefix, which removes their links and any XDP program on them.
set -euo pipefail

cmd=${1:-}
shift || true
senders=2
receivers=1
prefix=${QN_PREFIX:-qn}
while [ $# -gt 0 ]; do
  case "$1" in
    --senders) senders=$2; shift 2 ;;
    --receivers) receivers=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    *) echo "testbed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "testbed.sh: needs root (network namespaces and veth pairs)" >&2
  exit 1
fi
if [ ${#prefix} -gt 8 ]; then
  echo "testbed.sh: prefix '$prefix' too long (max 8 characters: interface names are 15)" >&2
  exit 2
fi

sw="$prefix-sw"

ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

mkns() {
  ns_exists "$1" || ip netns add "$1"
  ip -n "$1" link set lo up
  # No IPv6 autoconfiguration chatter (router solicitations, DAD) on the test links.
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# join NS KIND IDX MAC ADDR: a veth pair between NS (eth0) and the switch (P-sw-KIND IDX).
join() {
  local ns=$1 port="$sw-$2$3" mac=$4 addr=$5
  mkns "$ns"
  if ! ip -n "$sw" link show "$port" >/dev/null 2>&1; then
    ip -n "$ns" link del eth0 >/dev/null 2>&1 || true
    ip link add "$port" netns "$sw" type veth peer name eth0 netns "$ns"
  fi
  ip -n "$ns" link set eth0 address "$mac"
  ip -n "$ns" addr replace "$addr" dev eth0
  # Frames must cross unchanged: no VLAN tag offload (tags stay in the frame); GRO on so that
  # frames redirected into a veth by XDP are accepted (issue 4).
  ip netns exec "$ns" ethtool -K eth0 rxvlan off txvlan off gro on >/dev/null 2>&1 || true
  ip netns exec "$sw" ethtool -K "$port" rxvlan off txvlan off gro on >/dev/null 2>&1 || true
  ip -n "$sw" link set "$port" promisc on up
  ip -n "$ns" link set eth0 up
}

case "$cmd" in
  up)
    mkns "$sw"
    for i in $(seq 0 $((senders - 1))); do
      join "$prefix-s$i" s "$i" "02:71:6e:01:00:$(printf %02x "$i")" "10.71.0.$((1 + i))/24"
    done
    for j in $(seq 0 $((receivers - 1))); do
      join "$prefix-r$j" r "$j" "02:71:6e:02:00:$(printf %02x "$j")" "10.71.0.$((101 + j))/24"
    done
    echo "testbed.sh: up: $sw with $senders senders, $receivers receivers (prefix $prefix)"
    ;;
  down)
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-(sw|s[0-9]+|r[0-9]+)$" || true); do
      ip netns del "$ns"
    done
    echo "testbed.sh: down: removed namespaces with prefix $prefix"
    ;;
  show)
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-" || true); do
      echo "== $ns"; ip -n "$ns" -br link
    done
    ;;
  *)
    echo "usage: testbed.sh up|down|show [--senders N] [--receivers M] [--prefix P]" >&2
    exit 2
    ;;
esac

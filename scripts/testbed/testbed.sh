#!/usr/bin/env bash
# Builds (up) or removes (down) quench's veth testbed: N sender namespaces and M receiver
# namespaces, each joined to one switch namespace by a veth pair.
#
#   scripts/testbed/testbed.sh up   [--senders N] [--receivers M] [--prefix P] [--appliance] [--queues Q]
#                           [--mtu MTU]
#   scripts/testbed/testbed.sh down [--prefix P]
#   scripts/testbed/testbed.sh show [--prefix P]
#   scripts/testbed/testbed.sh --help
#
#   --senders N     sender namespaces (default 2)
#   --receivers M   receiver namespaces (default 1)
#   --prefix P      names' prefix, at most 8 characters (default qn)
#   --appliance     every host behind an appliance namespace (below)
#   --queues Q      Q receive and transmit queues on each veth end (default: the kernel's)
#   --mtu MTU       host-facing links' MTU (default 1500; below)
#
# Names (prefix P; tests pass their own so runs never collide):
#   namespaces  P-sw, P-s0..P-s{N-1}, P-r0..P-r{M-1}
#   links       in P-sI / P-rJ: "eth0"; in P-sw: P-sw-sI / P-sw-rJ (the switch ports)
#   MACs        sender I 02:71:6e:01:00:0I, receiver J 02:71:6e:02:00:0J
#   addresses   10.71.0.(1+I)/24 senders, 10.71.0.(101+J)/24 receivers (inside the namespaces)
# --appliance puts every host behind an appliance namespace P-ap (`quench appliance`): host X
# (sI / rJ) is joined to P-ap's P-ap-iX (inside), and P-ap's P-ap-oX (outside) to the switch's
# P-sw-X, so `quench appliance --inside P-ap/P-ap-iX --outside P-ap/P-ap-oX` stands between them.
# --mtu MTU (default 1500) sets every host-facing link (both ends) to MTU, and with --appliance
# the appliance-to-switch links to MTU + 4 (room for a CN-TAG). On a veth whose far end has an
# XDP program (the switch's and the appliance's AF_XDP ports) the kernel takes at most 3506 with
# 4 KiB pages (docs/design.md, "Sender appliance"), so with --appliance at most 3502.
# `up` is idempotent (creates only what is missing); `down` removes every namespace with the
# prefix, which removes their links and any XDP program on them.
set -euo pipefail

. "$(dirname "$0")/lib.sh"   # qn_usage, qn_bad
bad() { qn_bad testbed.sh "$1"; }
cmd=${1:-}
shift || true
case $cmd in
  -h|--help) qn_usage; exit 0 ;;
  up|down|show) ;;
  '') bad "up, down or show expected (--help)" ;;
  *) bad "unknown command $cmd: up, down or show (--help)" ;;
esac
senders=2
receivers=1
prefix=qn
appliance=0
queues=
mtu=1500
while [ $# -gt 0 ]; do
  case $1 in
    --senders|--receivers|--prefix|--queues|--mtu) [ $# -ge 2 ] || bad "$1 needs a value" ;;&
    --senders) senders=$2; shift ;;
    --receivers) receivers=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    --appliance) appliance=1 ;;
    --queues) queues=$2; shift ;;
    --mtu) mtu=$2; shift ;;
    -h|--help) qn_usage; exit 0 ;;
    *) bad "unknown flag $1 (--help lists the flags)" ;;
  esac
  shift
done

if [ "$(id -u)" -ne 0 ]; then
  echo "testbed.sh: needs root (network namespaces and veth pairs)" >&2
  exit 1
fi
case $mtu in
  ''|*[!0-9]*) echo "testbed.sh: --mtu $mtu: a number of octets" >&2; exit 2 ;;
esac
if [ "$mtu" -lt 68 ]; then
  echo "testbed.sh: --mtu $mtu: below IPv4's minimum of 68" >&2
  exit 2
fi
if [ ${#prefix} -gt 8 ]; then
  echo "testbed.sh: prefix '$prefix' too long (max 8 characters: interface names are 15)" >&2
  exit 2
fi

sw="$prefix-sw"
ap="$prefix-ap"

ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

mkns() {
  ns_exists "$1" || ip netns add "$1"
  ip -n "$1" link set lo up
  # No IPv6 autoconfiguration chatter (router solicitations, DAD) on the test links.
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# veth NS_A NAME_A NS_B NAME_B: a veth pair between two namespaces (kept if it exists), both
# ends up, promiscuous on the forwarding side (NS_B), VLAN offload off, GRO on (frames that XDP
# redirects into a veth are dropped without it, issue 4: veth_xdp_xmit delivers to the peer's
# NAPI, which exists only while the peer has GRO on or an XDP program; `quench blast --engine
# live` redirects into the sender's veth, and `quench switch` (its kernel fast path) into the switch's
# side of a host's pair, so the host side needs it too. A real NIC transmits redirected frames
# itself, ndo_xdp_xmit).
veth() {
  local na=$1 a=$2 nb=$3 b=$4
  if ! ip -n "$nb" link show "$b" >/dev/null 2>&1; then
    ip -n "$na" link del "$a" >/dev/null 2>&1 || true
    # --queues Q: Q receive and transmit queues a side (a multi-queue port for several switch
    # workers, one AF_XDP socket per queue); without it the kernel's default (a veth has as
    # many queues as there are possible CPUs).
    local q=()
    [ -n "$queues" ] && q=(numrxqueues "$queues" numtxqueues "$queues")
    ip link add "$b" netns "$nb" "${q[@]}" type veth peer name "$a" netns "$na" "${q[@]}"
  fi
  ip netns exec "$na" ethtool -K "$a" rxvlan off txvlan off gro on >/dev/null 2>&1 || true
  ip netns exec "$nb" ethtool -K "$b" rxvlan off txvlan off gro on >/dev/null 2>&1 || true
  ip -n "$nb" link set "$b" promisc on up
  ip -n "$na" link set "$a" up
}

# join NS KIND IDX MAC ADDR: host NS (eth0) joined to the switch (P-sw-KIND IDX), directly or,
# with --appliance, through P-ap.
join() {
  local ns=$1 port="$sw-$2$3" mac=$4 addr=$5
  mkns "$ns"
  if [ "$appliance" = 1 ]; then
    veth "$ns" eth0 "$ap" "$ap-i$2$3"
    veth "$ap" "$ap-o$2$3" "$sw" "$port"
    ip -n "$ap" link set "$ap-o$2$3" promisc on
    # Inside the congestion-notification domain a frame may carry a 4-octet CN-TAG on top of a
    # full-size frame (as a VLAN tag needs "baby giant" room): MTU + 4 between appliance and
    # switch.
    ip -n "$ap" link set "$ap-o$2$3" mtu $((mtu + 4))
    ip -n "$sw" link set "$port" mtu $((mtu + 4))
    ip -n "$ap" link set "$ap-i$2$3" mtu "$mtu"
  else
    veth "$ns" eth0 "$sw" "$port"
    ip -n "$sw" link set "$port" mtu "$mtu"
  fi
  ip -n "$ns" link set eth0 mtu "$mtu"
  ip -n "$ns" link set eth0 address "$mac"
  ip -n "$ns" addr replace "$addr" dev eth0
  # Kernel TCP/UDP from the hosts: a veth hands frames over with the L4 checksum left to offload
  # (CHECKSUM_PARTIAL); an AF_XDP / AF_PACKET forwarder copies them unfilled and the receiver
  # drops them ("TCP checksum incorrect"). With transmit checksum offload off the host's kernel
  # fills the checksum before the frame leaves (issue 17).
  ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null
}

case "$cmd" in
  up)
    mkns "$sw"
    if [ "$appliance" = 1 ]; then mkns "$ap"; fi
    for i in $(seq 0 $((senders - 1))); do
      join "$prefix-s$i" s "$i" "02:71:6e:01:00:$(printf %02x "$i")" "10.71.0.$((1 + i))/24"
    done
    for j in $(seq 0 $((receivers - 1))); do
      join "$prefix-r$j" r "$j" "02:71:6e:02:00:$(printf %02x "$j")" "10.71.0.$((101 + j))/24"
    done
    echo "testbed.sh: up: $sw with $senders senders, $receivers receivers (prefix $prefix)"
    ;;
  down)
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-(sw|ap|s[0-9]+|r[0-9]+)$" || true); do
      ip netns del "$ns"
    done
    echo "testbed.sh: down: removed namespaces with prefix $prefix"
    ;;
  show)
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-" || true); do
      echo "== $ns"; ip -n "$ns" -br link
    done
    ;;
esac

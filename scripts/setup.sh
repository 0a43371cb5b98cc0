#!/usr/bin/env bash
# Installs the system packages quench needs, idempotently, with apt-get (Debian).
# Runs `apt-get update` and `apt-get install` only when a package is missing, so a second run
# does nothing. A new package goes in PACKAGES below, one per line with its reason.
set -euo pipefail
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  '') ;;
  *) echo "setup.sh: unknown argument $1 (it takes none; --help)" >&2; exit 2 ;;
esac

PACKAGES=(
  # AF_XDP through xsk-rs (libbpf-sys builds libbpf from source):
  libelf-dev
  zlib1g-dev
  clang
  llvm
  m4
  pkg-config
  make
  # Wire-format integration tests: tshark decodes `quench frames` output, scapy checks ICRCs.
  tshark
  python3-scapy
  # scripts/hdrh-venv.sh: a venv with PyPI's hdrhistogram, the independent .hlog reader.
  python3-venv
  # Network namespaces, veth pairs and link settings for the datapath tests and the demo.
  iproute2
  ethtool
  # Unmodified applications as traffic: kernel TCP/UDP through the switch and the appliance
  # (engine/quench/tests/switch_netns.rs, scripts/testbed/appliance.sh).
  iperf3
  # Open vSwitch as the benchmarks' peer (scripts/bench/bench-forward.sh: the userspace datapath on
  # veth; scripts/bench/bench-dpdk.sh: OVS-DPDK). The scripts run their own ovsdb-server and
  # ovs-vswitchd in a temporary directory; the packages' system service is not used.
  openvswitch-switch
  openvswitch-switch-dpdk
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup.sh: all ${#PACKAGES[@]} system packages present"
  exit 0
fi

echo "setup.sh: installing ${missing[*]}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo env DEBIAN_FRONTEND=noninteractive); fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | "${SUDO[@]}" debconf-set-selections
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

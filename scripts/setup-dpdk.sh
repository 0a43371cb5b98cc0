#!/usr/bin/env bash
# Installs DPDK (optional: only the `dpdk` cargo feature of engine needs it), idempotently, with
# apt-get (Debian 12 ships DPDK 22.11). Exits 0 when DPDK is present or was installed, 1 when it
# cannot be installed here (no apt-get, no candidate, no root and no sudo): callers such as
# scripts/test.sh then skip the DPDK tests and say so.
set -euo pipefail
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  '') ;;
  *) echo "setup-dpdk.sh: unknown argument $1 (it takes none; --help)" >&2; exit 2 ;;
esac

PACKAGES=(
  # Headers, libdpdk.pc, the shared libraries and the PMD plugins (pmds-23.0/).
  libdpdk-dev
  # dpdk-testpmd and the tools (dpdk-devbind.py); handy for comparing, not needed to build.
  dpdk-dev
  # The C shim for DPDK's static inline burst calls is compiled by the `cc` crate.
  gcc
  pkg-config
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-dpdk.sh: DPDK $(pkg-config --modversion libdpdk) present"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "setup-dpdk.sh: no apt-get here; cannot install ${missing[*]}" >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! sudo -n true 2>/dev/null; then
    echo "setup-dpdk.sh: not root and no password-less sudo; cannot install ${missing[*]}" >&2
    exit 1
  fi
  SUDO=(sudo env DEBIAN_FRONTEND=noninteractive)
fi
export DEBIAN_FRONTEND=noninteractive
echo "setup-dpdk.sh: installing ${missing[*]}"
"${SUDO[@]}" apt-get update -qq || true
if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "setup-dpdk.sh: apt-get could not install ${missing[*]}" >&2
  exit 1
fi
echo "setup-dpdk.sh: DPDK $(pkg-config --modversion libdpdk) installed"

# Shared preamble of the veth testbed scripts (closed-loop.sh, pfc-incast.sh, tcd-victim.sh,
# appliance.sh, soak.sh); source it, then call `qn_setup NAME OUT_DIR` with `prefix` set:
#
# - not root: prints "NAME: needs root (network namespaces); skipping" and exits 0 (the tests
#   skip the same way);
# - `quench`: $QUENCH, or this tree's release binary, built if missing;
# - `out`: OUT_DIR, created, as an absolute path;
# - `sw_cpus` / `tx_cpus`: the last CPU for the switch, the others for the hosts (all of them
#   CPU 0 on a one-CPU machine);
# - `pids=()`: every background process the script adds is killed on exit, after which the
#   script's `qn_cleanup_hook` runs if it defines one, and the testbed with prefix `$prefix` is
#   torn down (trap on EXIT, so also after an error or Ctrl-C).
#
# The caller is at the repository root (scripts cd there first) and runs under `set -euo pipefail`.
# It parses its flags first (so that --help needs no root), with `qn_usage` and `qn_bad`.

# --help's text: the calling script's header comment, from line 2 up to its `set -` line.
qn_usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

# qn_bad NAME MESSAGE: a usage error, exit 2.
qn_bad() { echo "$1: $2" >&2; exit 2; }

# qn_arg NAME ARG: an argument that is none of the script's flags: --help prints the usage and
# exits 0, another flag is an error (exit 2), anything else is the next positional argument
# (appended to the caller's `pos`).
qn_arg() {
  case $2 in
    -h|--help) qn_usage; exit 0 ;;
    -*) qn_bad "$1" "unknown flag $2 (--help lists the flags)" ;;
    *) pos+=("$2") ;;
  esac
}

qn_setup() {
  local name=$1
  if [ "$(id -u)" -ne 0 ]; then
    echo "$name: needs root (network namespaces); skipping" >&2
    exit 0
  fi
  quench=${QUENCH:-$PWD/target/release/quench}
  [ -x "$quench" ] || cargo build --release -p quench --bin quench
  mkdir -p "$2"
  out=$(realpath "$2")
  local ncpu
  ncpu=$(nproc)
  sw_cpus=$((ncpu - 1))
  tx_cpus=0-$((ncpu > 1 ? ncpu - 2 : 0))
  pids=()
  trap qn_cleanup EXIT
}

qn_cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if declare -F qn_cleanup_hook >/dev/null; then qn_cleanup_hook || true; fi
  scripts/testbed/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
}

# Per-CPU backlog drops (softnet_stat's 2nd column), one line per CPU: a veth hands each frame
# to the receiving side's per-CPU backlog, which drops past net.core.netdev_max_backlog when
# softirqs fall behind.
qn_backlog_drops() { while read -r _ d _; do echo $((16#$d)); done < /proc/net/softnet_stat; }

# The testbed's namespaces (those named `$prefix-...`), one a line.
qn_namespaces() { ip netns list | awk -v p="$prefix-" 'index($1, p) == 1 {print $1}'; }

# Every veth end's counters of the testbed's namespaces into OUT/links-NS.json.
qn_save_links() {
  local ns
  for ns in $(qn_namespaces); do
    ip -n "$ns" -s -j link show > "$out/links-$ns.json" 2>/dev/null || true
  done
}

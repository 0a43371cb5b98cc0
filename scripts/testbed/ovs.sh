# shellcheck shell=bash
# Open vSwitch as the benchmarks' peer (scripts/bench/bench-forward.sh: the userspace datapath on the
# veth testbed; scripts/bench/bench-dpdk.sh: OVS-DPDK). Source it; the caller runs under
# `set -euo pipefail` and calls ovs_stop from its EXIT trap.
#
#   ovs_require NAME [dpdk]   exits 1 with a message naming what is missing: ovsdb-server,
#                             ovsdb-tool, ovs-vsctl, ovs-appctl, ovs-ofctl and ovs-vswitchd
#                             (Debian: openvswitch-switch), with `dpdk` also ovs-vswitchd-dpdk
#                             (openvswitch-switch-dpdk); scripts/setup.sh installs both
#   ovs_start [--netns NS | --new-netns] [--cpus LIST] [--dpdk EAL-ARGS] [KEY=VALUE ...]
#                             a private ovsdb-server and ovs-vswitchd: database, sockets, pid
#                             files and logs in a new temporary directory ($ovs_dir), never the
#                             system's (/etc/openvswitch, /var/run/openvswitch); the packages'
#                             service is not used. KEY=VALUE pairs go into the Open_vSwitch
#                             table's other_config before ovs-vswitchd starts (pmd-cpu-mask=...).
#                             ovs-vswitchd runs in namespace NS (the interfaces it opens must be
#                             there; --new-netns: a namespace of its own, so that the devices its
#                             bridges make never meet the host's) under `taskset -c LIST`.
#                             --dpdk: the DPDK build (ovs-vswitchd-dpdk) with dpdk-init=true and
#                             EAL-ARGS as dpdk-extra, plus a --file-prefix of its own. Returns 1,
#                             with the log's errors on stderr, when ovs-vswitchd does not come up
#   ovs_vsctl ARGS, ovs_appctl ARGS, ovs_ofctl ARGS
#                             the tools, pointed at this instance only
#   ovs_bridge BR DATAPATH_TYPE
#                             bridge BR (datapath_type netdev: the userspace datapath; system:
#                             the kernel module's) with one flow, actions=NORMAL (MAC learning)
#   ovs_port BR NAME [TYPE [KEY=VALUE ...]]
#                             port NAME on BR, its interface of TYPE (system when omitted) with
#                             options KEY=VALUE; an interface of type afxdp or system is
#                             remembered, so that ovs_stop detaches any XDP program left on it
#   ovs_kernel_datapath [load], ovs_kernel_unload
#                             whether the kernel has the openvswitch module (the kernel
#                             datapath); see below
#   ovs_stop                  ovs-vswitchd asked to exit removing its datapath ports (which
#                             unloads the afxdp ports' XDP programs), killed by pid after 10 s if
#                             it has not; ovsdb-server killed by pid; any XDP program still on the
#                             remembered interfaces detached; the bridges' devices deleted if
#                             still there (--new-netns: the namespace deleted); the directory
#                             removed, and with --dpdk the EAL's runtime directory
#                             (/var/run/dpdk/PREFIX, and /var/run/dpdk itself when the EAL made it
#                             and it is empty). Does nothing when no instance runs; safe to call
#                             twice
#
# The packages' binaries are called by their paths (OVS_VSWITCHD, OVS_VSWITCHD_DPDK), not through
# /usr/sbin/ovs-vswitchd, whose alternative openvswitch-switch-dpdk may switch.

OVS_VSWITCHD=${OVS_VSWITCHD:-/usr/lib/openvswitch-switch/ovs-vswitchd}
OVS_VSWITCHD_DPDK=${OVS_VSWITCHD_DPDK:-/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk}
OVS_SCHEMA=${OVS_SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}
ovs_dir=
ovs_db_pid=
ovs_sw_pid=
ovs_netns=
ovs_netns_made=0
ovs_dpdk_prefix=
ovs_dpdk_rundir_made=0
ovs_ifaces=()
ovs_bridges=()

ovs_require() {
  local name=$1 missing=() t
  for t in ovsdb-server ovsdb-tool ovs-vsctl ovs-appctl ovs-ofctl; do
    command -v "$t" >/dev/null || missing+=("$t")
  done
  [ -x "$OVS_VSWITCHD" ] || missing+=("$OVS_VSWITCHD")
  [ -r "$OVS_SCHEMA" ] || missing+=("$OVS_SCHEMA")
  if [ "${2:-}" = dpdk ] && [ ! -x "$OVS_VSWITCHD_DPDK" ]; then
    missing+=("$OVS_VSWITCHD_DPDK (openvswitch-switch-dpdk)")
  fi
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "$name: Open vSwitch is missing: ${missing[*]} (Debian: openvswitch-switch$([ "${2:-}" = dpdk ] && echo ", openvswitch-switch-dpdk"); scripts/setup.sh installs them)" >&2
    exit 1
  fi
}

# The environment every OVS program of this instance runs with: its files in $ovs_dir.
ovs_env() {
  env OVS_RUNDIR="$ovs_dir" OVS_DBDIR="$ovs_dir" OVS_LOGDIR="$ovs_dir" OVS_SYSCONFDIR="$ovs_dir" "$@"
}
ovs_vsctl() { ovs_env ovs-vsctl --db="unix:$ovs_dir/db.sock" --timeout=60 "$@"; }
ovs_appctl() { ovs_env ovs-appctl -t "$ovs_dir/ovs-vswitchd.ctl" "$@"; }
ovs_ofctl() {
  local cmd=$1 br=$2
  shift 2
  ovs_env ovs-ofctl "$cmd" "unix:$ovs_dir/$br.mgmt" "$@"
}

ovs_start() {
  local bin=$OVS_VSWITCHD cpus='' eal='' kv=() k
  ovs_netns=
  ovs_netns_made=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --netns) ovs_netns=$2; shift 2 ;;
      --new-netns) ovs_netns_made=1; shift ;;
      --cpus) cpus=$2; shift 2 ;;
      --dpdk) bin=$OVS_VSWITCHD_DPDK; eal=$2; shift 2 ;;
      *) kv+=("$1"); shift ;;
    esac
  done
  ovs_dir=$(mktemp -d "${TMPDIR:-/tmp}/quench-ovs.XXXXXX")
  ovs_ifaces=()
  ovs_bridges=()
  if [ "$ovs_netns_made" = 1 ]; then
    ovs_netns=$(basename "$ovs_dir")
    ip netns add "$ovs_netns"
  fi
  ovs_env ovsdb-tool create "$ovs_dir/conf.db" "$OVS_SCHEMA" >/dev/null
  # env execs ovsdb-server: $! is its pid.
  env OVS_RUNDIR="$ovs_dir" OVS_DBDIR="$ovs_dir" OVS_LOGDIR="$ovs_dir" OVS_SYSCONFDIR="$ovs_dir" \
    ovsdb-server "$ovs_dir/conf.db" --remote="punix:$ovs_dir/db.sock" \
    --unixctl="$ovs_dir/ovsdb-server.ctl" --pidfile="$ovs_dir/ovsdb-server.pid" \
    --log-file="$ovs_dir/ovsdb-server.log" >"$ovs_dir/ovsdb-server.out" 2>&1 &
  ovs_db_pid=$!
  for _ in $(seq 100); do
    [ -S "$ovs_dir/db.sock" ] && break
    kill -0 "$ovs_db_pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! ovs_vsctl --no-wait init; then
    echo "ovs: ovsdb-server did not start:" >&2
    cat "$ovs_dir/ovsdb-server.out" "$ovs_dir/ovsdb-server.log" >&2 2>/dev/null || true
    return 1
  fi
  if [ -n "$eal" ]; then
    # DPDK's runtime directory (/var/run/dpdk/PREFIX) is this instance's own, removed by
    # ovs_stop.
    ovs_dpdk_prefix=$(basename "$ovs_dir")
    ovs_dpdk_rundir_made=1
    [ -d /var/run/dpdk ] && ovs_dpdk_rundir_made=0
    kv+=(dpdk-init=true "dpdk-extra=$eal --file-prefix=$ovs_dpdk_prefix")
  fi
  for k in "${kv[@]}"; do
    ovs_vsctl --no-wait set Open_vSwitch . "other_config:${k%%=*}=\"${k#*=}\""
  done
  local pre=()
  [ -n "$ovs_netns" ] && pre+=(ip netns exec "$ovs_netns")
  [ -n "$cpus" ] && pre+=(taskset -c "$cpus")
  # ip netns exec and taskset exec their command: $! is ovs-vswitchd's pid.
  "${pre[@]}" env OVS_RUNDIR="$ovs_dir" OVS_DBDIR="$ovs_dir" OVS_LOGDIR="$ovs_dir" \
    OVS_SYSCONFDIR="$ovs_dir" "$bin" "unix:$ovs_dir/db.sock" --unixctl="$ovs_dir/ovs-vswitchd.ctl" \
    --pidfile="$ovs_dir/ovs-vswitchd.pid" --log-file="$ovs_dir/ovs-vswitchd.log" \
    >"$ovs_dir/ovs-vswitchd.out" 2>&1 &
  ovs_sw_pid=$!
  # DPDK's start (memory without hugepages is faulted in page by page) takes seconds.
  for _ in $(seq 600); do
    kill -0 "$ovs_sw_pid" 2>/dev/null || break
    ovs_appctl version >/dev/null 2>&1 && break
    sleep 0.1
  done
  if ! kill -0 "$ovs_sw_pid" 2>/dev/null || ! ovs_appctl version >/dev/null 2>&1; then
    echo "ovs: $(basename "$bin") did not start; its log's errors:" >&2
    ovs_log_errors
    return 1
  fi
}

# The warnings and errors of ovs-vswitchd's log (its output if the log has none) on stderr.
ovs_log_errors() {
  grep -E '\|(ERR|EMER|WARN)\|' "$ovs_dir/ovs-vswitchd.log" >&2 2>/dev/null \
    || cat "$ovs_dir/ovs-vswitchd.out" >&2 2>/dev/null || true
}

ovs_bridge() {
  ovs_vsctl add-br "$1" -- set bridge "$1" datapath_type="$2"
  ovs_bridges+=("$1")
  # A new bridge's one flow is already this (fail_mode standalone); stated, so that the figure
  # is NORMAL's whatever the defaults become.
  ovs_ofctl del-flows "$1"
  ovs_ofctl add-flow "$1" priority=0,actions=NORMAL
}

ovs_port() {
  local br=$1 name=$2 type=${3:-system} opts=() o
  shift 2
  [ $# -gt 0 ] && shift
  for o in "$@"; do opts+=("options:${o%%=*}=\"${o#*=}\""); done
  if ! ovs_vsctl add-port "$br" "$name" -- set interface "$name" type="$type" "${opts[@]}"; then
    echo "ovs: port $name ($type) refused; the log's errors:" >&2
    ovs_log_errors
    return 1
  fi
  case "$type" in afxdp | afxdp-nonpmd | system) ovs_ifaces+=("$name") ;; esac
}

ovs_stop() {
  [ -n "$ovs_dir" ] || return 0
  local i
  if [ -n "$ovs_sw_pid" ] && kill -0 "$ovs_sw_pid" 2>/dev/null; then
    ovs_appctl --timeout=10 exit --cleanup >/dev/null 2>&1 || true
    for i in $(seq 100); do
      kill -0 "$ovs_sw_pid" 2>/dev/null || break
      [ "$i" = 100 ] && kill -KILL "$ovs_sw_pid" 2>/dev/null
      sleep 0.1
    done
  fi
  [ -z "$ovs_sw_pid" ] || wait "$ovs_sw_pid" 2>/dev/null || true
  if [ -n "$ovs_db_pid" ]; then
    kill "$ovs_db_pid" 2>/dev/null || true
    wait "$ovs_db_pid" 2>/dev/null || true
  fi
  # A killed ovs-vswitchd leaves its afxdp ports' programs attached; the next forwarder on
  # these interfaces would find them.
  local at=()
  [ -n "$ovs_netns" ] && at=(-n "$ovs_netns")
  for i in "${ovs_ifaces[@]}"; do
    ip "${at[@]}" link set dev "$i" xdp off 2>/dev/null || true
    ip "${at[@]}" link set dev "$i" xdpgeneric off 2>/dev/null || true
  done
  # The devices a killed ovs-vswitchd may leave in its namespace (never the host's, where a
  # system OVS may own the same names): its bridges' internal ports (taps in the userspace
  # datapath) and the datapaths' own.
  if [ "$ovs_netns_made" = 1 ]; then
    ip netns del "$ovs_netns" 2>/dev/null || true
  elif [ -n "$ovs_netns" ]; then
    for i in "${ovs_bridges[@]}" ovs-netdev ovs-system; do
      ip "${at[@]}" link del "$i" 2>/dev/null || true
    done
  fi
  if [ -n "$ovs_dpdk_prefix" ]; then
    rm -rf "/var/run/dpdk/$ovs_dpdk_prefix"
    # Made by this instance's EAL: removed unless another DPDK program has put its own there.
    if [ "$ovs_dpdk_rundir_made" = 1 ]; then rmdir /var/run/dpdk 2>/dev/null || true; fi
  fi
  rm -rf "$ovs_dir"
  ovs_dir='' ovs_db_pid='' ovs_sw_pid='' ovs_dpdk_prefix='' ovs_netns='' ovs_netns_made=0
  ovs_ifaces=()
  ovs_bridges=()
}

# Whether this kernel has the openvswitch module (loaded, or loadable: `modprobe -n`), OVS's
# kernel datapath. With `load`, a loadable module is loaded (ovs-vswitchd does not load it
# itself) and ovs_kernel_unload removes it again; one that was loaded already stays.
ovs_module_loaded=0
ovs_kernel_datapath() {
  [ -d /sys/module/openvswitch ] && return 0
  command -v modprobe >/dev/null && modprobe -n -q openvswitch 2>/dev/null || return 1
  if [ "${1:-}" = load ]; then
    modprobe -q openvswitch || return 1
    ovs_module_loaded=1
  fi
}
ovs_kernel_unload() {
  if [ "$ovs_module_loaded" = 1 ]; then modprobe -q -r openvswitch 2>/dev/null || true; fi
  ovs_module_loaded=0
}

#!/usr/bin/env bash
# The README's first command: installs what is needed, builds quench, and runs the most complete
# thing it does today: write one frame of every kind quench emits to a pcap file, decode it with
# quench, and show Wireshark's (tshark's) view of the same file.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cargo build --release -p engine
quench=target/release/quench
out=${1:-out/frames.pcap}
mkdir -p "$(dirname "$out")"

echo "== quench frames --pcap $out"
"$quench" frames --pcap "$out"

echo "== quench frames --decode $out (one line per frame; CNMs too, which Wireshark lacks)"
"$quench" frames --decode "$out" --link-rate 100gbit

lua=../shared/tools/wireshark/qau.lua
tshark_args=()
if [ -f "$lua" ]; then tshark_args=(-X "lua_script:$lua"); fi
echo "== tshark -r $out (summary)"
tshark "${tshark_args[@]}" -r "$out" 2>/dev/null
echo "== tshark -V -r $out -Y cnm (the CNM, with the shared 802.1Qau dissector)"
tshark "${tshark_args[@]}" -V -r "$out" -Y "frame.number == 2" 2>/dev/null | sed -n '/802.1Qau CN-TAG/,$p'

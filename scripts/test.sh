#!/usr/bin/env bash
# Runs the whole test suite: the README's second command, and what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace 2>&1

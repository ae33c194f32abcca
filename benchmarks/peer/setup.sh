#!/usr/bin/env bash
# Creates the separate venv for the reference peer (Agent Lightning 0.3.0; no torch).
# benchmarks/store_throughput.py --peer uses it when present.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python3 -m venv .bench-venv-peer
.bench-venv-peer/bin/pip install -q agentlightning==0.3.0
echo "peer venv ready: .bench-venv-peer"

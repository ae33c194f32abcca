#!/usr/bin/env bash
# Creates the venv of the TRL peer of benchmarks/grpo_update.py: TRL 1.16.0 (+ datasets,
# pandas, pyarrow) in .bench-venv-trl, reusing the main venv's torch / transformers /
# peft / accelerate through a .pth file, so neither venv's torch changes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MAIN_SITE="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
python3 -m venv .bench-venv-trl
PEER_SITE="$(.bench-venv-trl/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$MAIN_SITE" > "$PEER_SITE/_agentbolt_main_venv.pth"
if .bench-venv-trl/bin/pip install --dry-run trl==1.16.0 | grep -E "Would install.* torch-"; then
  echo "refusing: installing TRL would change torch" >&2
  exit 1
fi
.bench-venv-trl/bin/pip install -q trl==1.16.0
echo "TRL peer venv ready: .bench-venv-trl"

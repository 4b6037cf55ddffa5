#!/usr/bin/env bash
# Validate gpuscale-exporter against nvidia-smi (real GPU) or the NVML simulator.
# All flags go to validate.py; see `validate.sh --help` and docs/gpu-validation.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
    echo "validate.sh: $python not found (set PYTHON=...)" >&2
    exit 2
fi
exec "$python" "$here/validate.py" "$@"

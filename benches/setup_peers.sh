#!/usr/bin/env bash
# Benchmark-only environment for benches/compare.py: propertok next to its peers
# (outlines-core, llguidance, xgrammar), installed from PyPI into a separate virtual
# environment. Nothing here is a runtime or test dependency of propertok.
#
#   bash benches/setup_peers.sh                 # creates /tmp/propertok-bench-venv
#   BENCH_VENV=/somewhere bash benches/setup_peers.sh
#   SKIP_XGRAMMAR=1 bash benches/setup_peers.sh # no torch (see below): compare.py skips xgrammar
#
# The venv is created with --system-site-packages so that it sees the propertok build the
# developers use (`pip install -e .` in the system Python: the benchmark always measures the
# extension that is currently built). When propertok is not importable there, the repository
# is installed into the venv (maturin, release profile).
#
# xgrammar imports torch unconditionally (xgrammar/testing.py, its bitmask helpers). PyPI has no
# CPU-only torch wheel for Linux x86_64: `pip install torch` pulls the CUDA build and its
# nvidia-* libraries, about 2.8 GB of wheels (5 GB installed, ~1 min here). torch is only
# imported, never used on a GPU: the benchmark passes xgrammar the same numpy/torch CPU bitmask
# as everyone else.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCH_VENV:-/tmp/propertok-bench-venv}"
PY="${PYTHON:-python3}"

# Versions measured in benches/RESULTS.md; override with e.g. OUTLINES_CORE=outlines-core==0.2.11.
OUTLINES_CORE="${OUTLINES_CORE:-outlines-core==0.2.14}"
LLGUIDANCE="${LLGUIDANCE:-llguidance==1.9.1}"
XGRAMMAR="${XGRAMMAR:-xgrammar==0.2.8}"
TORCH="${TORCH:-torch==2.15.0}"
TRANSFORMERS="${TRANSFORMERS:-transformers==5.23.0}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv --system-site-packages "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)

"${PIP[@]}" tokenizers numpy jsonschema psutil
"${PIP[@]}" "$OUTLINES_CORE" "$LLGUIDANCE"

if [ "${SKIP_XGRAMMAR:-0}" != "1" ]; then
    "${PIP[@]}" "$TORCH" "$TRANSFORMERS"
    # --no-deps: xgrammar's remaining requirements are listed here, and triton comes with torch.
    "${PIP[@]}" --no-deps "$XGRAMMAR"
    "${PIP[@]}" apache-tvm-ffi pydantic "typing-extensions>=4.9.0"
fi

if ! "$VENV/bin/python" -c "import propertok" 2>/dev/null; then
    echo "propertok is not importable from the system site-packages: installing $REPO into $VENV"
    "${PIP[@]}" -e "$REPO"
fi

"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
for name in ["propertok", "outlines-core", "llguidance", "xgrammar", "torch", "transformers", "tokenizers", "numpy"]:
    try:
        print(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: not installed")
EOF
echo "ready: $VENV/bin/python benches/compare.py --help"

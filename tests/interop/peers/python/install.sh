#!/usr/bin/env bash
# Installs a Python peer folder's pinned packages into .venv inside it:
# the folder given as the argument, or this script's own (the a2a-sdk and
# mcp peers). peers/python-tasks/install.sh runs it for its folder.
# Idempotent: it does nothing when .venv already holds exactly
# requirements.txt (a stamp file records the file's hash) and works with the
# python3 on PATH.
set -euo pipefail
cd "${1:-$(dirname "$0")}"

PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null; then
  echo "install.sh: $PYTHON is not installed; the Python peers need Python 3.10 or newer" >&2
  exit 1
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
  echo "install.sh: $("$PYTHON" --version 2>&1) is too old; the Python peers need Python 3.10 or newer" >&2
  exit 1
}

want="$(sha256sum requirements.txt | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
stamp=.venv/.installed
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

rm -rf .venv
"$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input -r requirements.txt
echo "$want" > "$stamp"
echo "install.sh: installed the Python peers' packages into $(pwd)/.venv" >&2

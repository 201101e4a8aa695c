#!/usr/bin/env bash
# Installs the MCP Tasks client's pinned packages (requirements.txt) into
# .venv beside this script, as peers/python/install.sh does for its own
# folder: idempotent, with the same stamp file. A venv of its own keeps
# the a2a-sdk peers' small.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../python/install.sh" "$here"

#!/usr/bin/env bash
# Installs the pinned @a2a-js/sdk peers of the interop tests: `npm ci` in
# peers/node (the 1.x SDK, A2A 1.0) and peers/node-v03 (the 0.3.x SDK,
# A2A 0.3). A directory whose lock file, package.json and Node version did
# not change since its last install (stamp in node_modules) is left alone,
# so running this again is fast.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for dir in "$here" "$here/../node-v03"; do
	dir="$(cd "$dir" && pwd)"
	want="$(cat "$dir/package-lock.json" "$dir/package.json" <(node --version) | sha256sum | cut -d' ' -f1)"
	stamp="$dir/node_modules/.interop-install-stamp"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		continue
	fi
	echo "npm ci in $dir" >&2
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
	echo "$want" >"$stamp"
done

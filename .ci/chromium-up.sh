#!/usr/bin/env bash
# Make a headless Chromium available for the console's browser test
# (cmd/berthd: TestConsole_Browser loads the debug listener's page with
# `chromium --headless=new --dump-dom`).
#
#   - reuses `chromium` or `chromium-browser` when one is on PATH;
#   - otherwise installs Debian's chromium package (no recommends: the test
#     needs no fonts, no GPU and no desktop integration);
#   - then proves it works: a headless --dump-dom of a data: URL must print
#     the document, within 60 s. A Chromium that cannot start headless here
#     (missing libraries, no /dev/shm) fails the script, not the test later.
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

# find_chromium prints the first Chromium binary on PATH ("" when none).
find_chromium() {
	local b
	for b in chromium chromium-browser; do
		if command -v "$b" >/dev/null 2>&1; then
			command -v "$b"
			return 0
		fi
	done
	echo ""
}

BIN=$(find_chromium)
if [ -z "$BIN" ]; then
	apt_install chromium
	BIN=$(find_chromium)
	[ -n "$BIN" ] || die "chromium installed but neither chromium nor chromium-browser is on PATH"
else
	say "reusing $BIN"
fi

# A throwaway profile: a shared one would collide with a running test's.
PROFILE=$(mktemp -d /tmp/berth-chromium-up.XXXXXX)
trap 'rm -rf "$PROFILE"' EXIT
OUT=$(timeout 60 "$BIN" --headless=new --no-sandbox --disable-gpu --no-first-run \
	--user-data-dir="$PROFILE" --dump-dom 'data:text/html,<p id=berth-ci>ok</p>' 2>/dev/null) ||
	die "$BIN did not run headless (exit $?)"
grep -q 'id="berth-ci"' <<<"$OUT" || die "$BIN ran but printed no document: $OUT"
say "$("$BIN" --version 2>/dev/null | head -n1) runs headless"

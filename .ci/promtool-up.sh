#!/usr/bin/env bash
# Make `promtool` (Prometheus' rule checker) available, for the test that checks
# cmd/berthd/deploy/alerts.yml and the metric names it and the dashboard use.
#
#   - does nothing when promtool is already on PATH;
#   - otherwise installs Debian's prometheus package (promtool ships in it)
#     without letting its postinst start a Prometheus server: a policy-rc.d
#     that forbids service starts is put in place for the install when none is
#     there, and removed again; under systemd the unit the package enables is
#     stopped and disabled (we want the tool, not a server on :9090).
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

if command -v promtool >/dev/null 2>&1; then
	say "promtool present: $(promtool --version 2>&1 | head -n1)"
	exit 0
fi

POLICY=/usr/sbin/policy-rc.d
ours=""
if [ ! -e "$POLICY" ]; then
	printf '#!/bin/sh\n# promtool-up.sh: no service starts during this install\nexit 101\n' >"$POLICY"
	chmod 755 "$POLICY"
	ours=1
fi
cleanup() { if [ -n "$ours" ]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT

apt_install prometheus

if systemd_running; then
	systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null 2>&1 || die "prometheus installed but promtool is not on PATH"
say "promtool installed: $(promtool --version 2>&1 | head -n1)"

# Shared settings and helpers for the .ci scripts; source it, do not run it.
# The variables below are used by the scripts that source this file.
# shellcheck shell=bash disable=SC2034

# Go and the sbin directories (dockerd lives in /usr/sbin) on PATH, whatever
# environment CI or a login shell handed us.
export PATH="/usr/local/go/bin:${HOME:-/root}/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}"

# Where the scripts keep what they start: logs, pid files, registry storage.
BERTH_CI_STATE="${BERTH_CI_STATE:-/var/lib/berth-ci}"

# The address pool our dockerd runs with: /24 networks carved from
# 172.16.0.0/12 give 4096 bridge networks (Docker's default gives about 30).
BERTH_POOL_BASE="172.16.0.0/12"
BERTH_POOL_SIZE="24"
# Fewer networks than this in the running daemon's pools earns a warning.
BERTH_POOL_MIN_NETWORKS=256

# Docker's default bridge (docker0), where berthd runs single-container leases
# when dockerd isolates its containers ("icc": false): a /20 holds over 4,000,
# outside the address pool above, the host's 192.0.2.0/24 and the DNS server
# 10.255.255.53.
BERTH_BRIDGE_BIP="10.200.0.1/20"
BERTH_BRIDGE_SUBNET="10.200.0.0/20"

BERTH_REGISTRY_ADDR="${BERTH_REGISTRY_ADDR:-127.0.0.1:5000}"
BERTH_TEST_IMAGE="${BERTH_TEST_IMAGE:-${BERTH_REGISTRY_ADDR}/berth/workload:test}"

# say prints a progress line prefixed with the script's name.
say() { printf '[%s] %s\n' "$(basename "$0")" "$*"; }
warn() { printf '[%s] WARNING: %s\n' "$(basename "$0")" "$*" >&2; }
die() {
	printf '[%s] ERROR: %s\n' "$(basename "$0")" "$*" >&2
	exit 1
}

# apt_install installs Debian packages; it runs `apt-get update` only when the
# install fails without it (a fresh machine may have no package lists yet).
apt_install() {
	say "apt-get install $*"
	export DEBIAN_FRONTEND=noninteractive
	if apt-get install -y --no-install-recommends "$@"; then
		return 0
	fi
	say "install failed; running apt-get update and retrying"
	apt-get update
	apt-get install -y --no-install-recommends "$@"
}

# systemd_running tells whether systemd is PID 1 (services are its job then).
# Both checks: images may carry a stale /run/systemd while PID 1 is not systemd.
systemd_running() { [ -d /run/systemd/system ] && [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; }

# show_log_tail prints the end of a log file to stderr (on failures).
show_log_tail() {
	[ -f "$1" ] || return 0
	printf -- '--- last lines of %s ---\n' "$1" >&2
	tail -n 40 "$1" >&2
	printf -- '---\n' >&2
}

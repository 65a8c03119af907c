#!/usr/bin/env bash
# Make a Docker engine answer on the default socket, and make sure it can hold
# many bridge networks (berth creates one per lease).
#
#   - reuses a daemon that already answers `docker info`;
#   - installs docker.io (and iptables) when dockerd is missing, writing
#     /etc/docker/daemon.json with our address pool first when there is none,
#     so a daemon the package itself starts (systemd) gets the pool too;
#   - on a systemd machine: `systemctl start docker`;
#   - otherwise starts dockerd in the background with
#     --default-address-pool base=172.16.0.0/12,size=24 (unless daemon.json
#     already sets pools: dockerd refuses the same setting twice), logging to
#     $BERTH_CI_STATE/dockerd.log, and waits up to 60 s for it;
#   - warns when the running daemon's pools hold fewer than 256 networks.
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

DAEMON_JSON=/etc/docker/daemon.json
DOCKERD_LOG="$BERTH_CI_STATE/dockerd.log"
DOCKERD_PIDFILE=/var/run/docker.pid
CONTAINERD_PIDFILE=/var/run/docker/containerd/containerd.pid
STARTED_PID=""

docker_answers() { timeout 20 docker info >/dev/null 2>&1; }

daemon_json_sets_pools() { [ -f "$DAEMON_JSON" ] && grep -q '"default-address-pools"' "$DAEMON_JSON"; }

write_daemon_json() {
	if [ -e "$DAEMON_JSON" ]; then
		daemon_json_sets_pools || warn "$DAEMON_JSON exists without default-address-pools; leaving it alone"
		return 0
	fi
	say "writing $DAEMON_JSON with default-address-pools base=$BERTH_POOL_BASE size=$BERTH_POOL_SIZE"
	mkdir -p "$(dirname "$DAEMON_JSON")"
	cat >"$DAEMON_JSON" <<JSON
{
  "default-address-pools": [
    { "base": "$BERTH_POOL_BASE", "size": $BERTH_POOL_SIZE }
  ]
}
JSON
}

install_docker() {
	local pkgs=(docker.io)
	command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
	write_daemon_json
	apt_install "${pkgs[@]}"
}

# pid_is PIDFILE NAME: the pid file names a live process called NAME.
pid_is() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

start_dockerd() {
	if systemd_running; then
		say "systemd is running: systemctl start docker"
		systemctl start docker
		return 0
	fi
	if pid_is "$DOCKERD_PIDFILE" dockerd; then
		say "dockerd (pid $(cat "$DOCKERD_PIDFILE")) is running but not answering yet; waiting for it"
		return 0
	fi
	# A daemon that was killed leaves pid files behind; if their pids now
	# belong to other processes, dockerd would refuse to start or wait for a
	# containerd that is not there.
	if [ -f "$DOCKERD_PIDFILE" ]; then
		say "removing stale $DOCKERD_PIDFILE"
		rm -f "$DOCKERD_PIDFILE"
	fi
	if [ -f "$CONTAINERD_PIDFILE" ] && ! pid_is "$CONTAINERD_PIDFILE" containerd; then
		say "removing stale $CONTAINERD_PIDFILE"
		rm -f "$CONTAINERD_PIDFILE"
	fi
	if ! mountpoint -q /sys/fs/cgroup; then
		command -v cgroupfs-mount >/dev/null 2>&1 || apt_install cgroupfs-mount
		say "mounting cgroups (cgroupfs-mount)"
		cgroupfs-mount
	fi

	local args=()
	if daemon_json_sets_pools; then
		say "address pools come from $DAEMON_JSON"
	else
		args+=(--default-address-pool "base=$BERTH_POOL_BASE,size=$BERTH_POOL_SIZE")
	fi
	mkdir -p "$BERTH_CI_STATE"
	# Containers and their log streams use many descriptors; take what we may.
	ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	say "starting dockerd${args[*]:+ ${args[*]}} (log: $DOCKERD_LOG)"
	# setsid + all three streams redirected: the daemon outlives this script
	# and holds no pipe of whoever ran it (CI waits for its output to close).
	# From / so the daemon pins no directory of whoever started it.
	cd /
	setsid dockerd "${args[@]}" </dev/null >>"$DOCKERD_LOG" 2>&1 &
	STARTED_PID=$!
	echo "$STARTED_PID" >"$BERTH_CI_STATE/dockerd.pid"
}

wait_for_docker() {
	local deadline=$((SECONDS + 60))
	until docker_answers; do
		if [ -n "$STARTED_PID" ] && ! kill -0 "$STARTED_PID" 2>/dev/null; then
			show_log_tail "$DOCKERD_LOG"
			die "dockerd exited during startup"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			show_log_tail "$DOCKERD_LOG"
			die "docker did not answer within 60 s"
		fi
		sleep 1
	done
}

# check_pools warns when the daemon's default address pools hold fewer than
# BERTH_POOL_MIN_NETWORKS bridge networks.
check_pools() {
	local pools base size prefix total=0 shown=""
	pools=$(docker info --format '{{range .DefaultAddressPools}}{{.Base}} {{.Size}}{{"\n"}}{{end}}' 2>/dev/null || true)
	while read -r base size; do
		[ -n "$base" ] || continue
		prefix=${base#*/}
		if [ "$size" -ge "$prefix" ]; then
			total=$((total + (1 << (size - prefix))))
		fi
		shown+="${shown:+, }$base in /$size networks"
	done <<<"$pools"
	if [ "$total" -lt "$BERTH_POOL_MIN_NETWORKS" ]; then
		if [ -z "$shown" ]; then
			shown="Docker's built-in defaults"
			total="about 30"
		fi
		warn "the running dockerd's default address pools ($shown) hold $total bridge networks; berth creates one network per lease."
		warn "restart dockerd with --default-address-pool base=$BERTH_POOL_BASE,size=$BERTH_POOL_SIZE (or default-address-pools in $DAEMON_JSON) for more."
	else
		say "address pools: $shown ($total networks)"
	fi
}

main() {
	if command -v docker >/dev/null 2>&1 && docker_answers; then
		say "docker already answers; reusing it"
	else
		if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
			install_docker
		fi
		# A package install may have started the daemon itself.
		if docker_answers; then
			say "docker answers after install"
		else
			start_dockerd
			wait_for_docker
		fi
	fi
	docker info >/dev/null # verify; prints the reason if it fails
	say "docker engine ready: server $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
	check_pools
}

# Run unless sourced (sourcing lets one exercise a single step by hand).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi

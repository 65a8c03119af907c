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
#   - warns when the running daemon's pools hold fewer than 256 networks;
#   - makes dockerd isolate the containers on its default bridge ("icc":
#     false) and give it a /20 (bip $BERTH_BRIDGE_BIP), merged into
#     daemon.json (its address pools kept), with bridged traffic through
#     iptables (br_netfilter); a daemon running without them is restarted
#     (systemd, or the dockerd this script started from its pid file). A
#     restart stops every container: run it when nothing is under test.
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

# merge_daemon_json sets "icc": false and our bip in daemon.json, keeping
# whatever else it holds (its address pools; ours added when it has none).
merge_daemon_json() {
	command -v python3 >/dev/null 2>&1 || apt_install python3
	mkdir -p "$(dirname "$DAEMON_JSON")"
	python3 - "$DAEMON_JSON" "$BERTH_BRIDGE_BIP" "$BERTH_POOL_BASE" "$BERTH_POOL_SIZE" <<'PY'
import json, os, sys
path, bip, base, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read().strip()
    cfg = json.loads(text) if text else {}
cfg.setdefault("default-address-pools", [{"base": base, "size": size}])
cfg["icc"] = False
cfg["bip"] = bip
tmp = path + ".berth-tmp"
with open(tmp, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
os.replace(tmp, path)
PY
	say "$DAEMON_JSON: icc false, bip $BERTH_BRIDGE_BIP"
}

# bridge_isolated: the running daemon's default bridge has icc off and our subnet.
bridge_isolated() {
	local got
	got=$(docker network inspect bridge --format \
		'{{index .Options "com.docker.network.bridge.enable_icc"}} {{range .IPAM.Config}}{{.Subnet}}{{end}}' 2>/dev/null) || return 1
	[ "$got" = "false $BERTH_BRIDGE_SUBNET" ]
}

# bridge_netfilter: bridged traffic passes iptables, where icc=false drops it.
bridge_netfilter() {
	modprobe br_netfilter 2>/dev/null || true
	if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
		sysctl -qw net.bridge.bridge-nf-call-iptables=1 || warn "could not turn on net.bridge.bridge-nf-call-iptables"
	else
		warn "br_netfilter is not available: icc=false cannot isolate containers on the default bridge"
	fi
}

# restart_dockerd restarts a daemon we may restart: systemd's, or the one this
# script started (its pid file); anything else is left alone, with a warning.
restart_dockerd() {
	if systemd_running; then
		say "restarting docker (systemctl) for icc/bip"
		systemctl restart docker
		return 0
	fi
	local pid
	pid=$(cat "$BERTH_CI_STATE/dockerd.pid" 2>/dev/null || true)
	if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != dockerd ]; then
		warn "dockerd was not started by this script nor by systemd; restart it yourself for icc false and bip $BERTH_BRIDGE_BIP"
		return 0
	fi
	say "restarting dockerd (pid $pid) for icc/bip"
	kill -TERM "$pid"
	local deadline=$((SECONDS + 60))
	while kill -0 "$pid" 2>/dev/null; do
		[ "$SECONDS" -lt "$deadline" ] || die "dockerd (pid $pid) did not stop within 60 s"
		sleep 1
	done
	start_dockerd
}

# isolate_bridge leaves the daemon isolating its default bridge's containers.
isolate_bridge() {
	bridge_netfilter
	merge_daemon_json
	if bridge_isolated; then
		say "default bridge: icc off, $BERTH_BRIDGE_SUBNET"
		return 0
	fi
	restart_dockerd
	wait_for_docker
	bridge_isolated || die "the default bridge is still not isolated on $BERTH_BRIDGE_SUBNET after the restart"
	say "default bridge: icc off, $BERTH_BRIDGE_SUBNET"
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

	merge_daemon_json # icc and bip come from daemon.json too
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
	isolate_bridge
}

# Run unless sourced (sourcing lets one exercise a single step by hand).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi

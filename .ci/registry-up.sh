#!/usr/bin/env bash
# Make an open (no auth) Docker registry answer on http://127.0.0.1:5000/v2/.
#
#   - reuses a registry that already answers there;
#   - installs docker-registry when missing; if the package's own service
#     came up (Debian's config, with basic auth), stops it;
#   - starts `docker-registry serve` in the background with filesystem
#     storage under $BERTH_CI_STATE/registry, bound to 127.0.0.1:5000, and
#     waits up to 30 s for it.
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

REGISTRY_URL="http://$BERTH_REGISTRY_ADDR/v2/"
REGISTRY_CONFIG="$BERTH_CI_STATE/registry.yml"
REGISTRY_LOG="$BERTH_CI_STATE/registry.log"
STARTED_PID=""

# registry_state prints: open (a registry answers 200), auth (a registry that
# wants credentials), foreign (something else answers), none.
registry_state() {
	local out code
	out=$(curl -sS -m 5 -o /dev/null -D - -w '%{http_code}' "$REGISTRY_URL" 2>/dev/null) || {
		echo none
		return
	}
	code=${out##*$'\n'}
	if ! grep -qi '^docker-distribution-api-version: *registry/2' <<<"$out"; then
		echo foreign
	elif [ "$code" = 200 ]; then
		echo open
	elif [ "$code" = 401 ]; then
		echo auth
	else
		echo foreign
	fi
}

# stop_packaged_registry stops the service the docker-registry package may
# start on install (systemd, or sysvinit without a policy-rc.d forbidding
# it): it runs Debian's config, which requires basic auth, so pushes would
# fail against it, and it holds port 5000.
stop_packaged_registry() {
	if systemd_running; then
		if systemctl is-active --quiet docker-registry; then
			say "stopping and disabling the docker-registry service the package started (it requires auth)"
			systemctl disable --now docker-registry
		fi
	elif [ -x /etc/init.d/docker-registry ] && /etc/init.d/docker-registry status >/dev/null 2>&1; then
		say "stopping the docker-registry service the package started (it requires auth)"
		/etc/init.d/docker-registry stop
	fi
}

write_config() {
	mkdir -p "$BERTH_CI_STATE/registry"
	cat >"$REGISTRY_CONFIG" <<YAML
# Written by .ci/registry-up.sh: the local registry berth's tests push to.
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $BERTH_CI_STATE/registry
  delete:
    enabled: true
http:
  addr: $BERTH_REGISTRY_ADDR
YAML
}

start_registry() {
	write_config
	say "starting docker-registry serve $REGISTRY_CONFIG (log: $REGISTRY_LOG)"
	# setsid + all streams redirected: outlives us, holds none of our pipes.
	cd /
	setsid docker-registry serve "$REGISTRY_CONFIG" </dev/null >>"$REGISTRY_LOG" 2>&1 &
	STARTED_PID=$!
	echo "$STARTED_PID" >"$BERTH_CI_STATE/registry.pid"
	local deadline=$((SECONDS + 30))
	until [ "$(registry_state)" = open ]; do
		if ! kill -0 "$STARTED_PID" 2>/dev/null; then
			show_log_tail "$REGISTRY_LOG"
			die "docker-registry exited during startup"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			show_log_tail "$REGISTRY_LOG"
			die "docker-registry did not answer on $REGISTRY_URL within 30 s"
		fi
		sleep 0.5
	done
}

main() {
	command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
	local state
	state=$(registry_state)
	if [ "$state" = none ] && ! command -v docker-registry >/dev/null 2>&1; then
		apt_install docker-registry
		stop_packaged_registry
		state=$(registry_state)
	fi
	case "$state" in
	open) say "a registry already answers on $REGISTRY_URL; reusing it" ;;
	none) start_registry ;;
	auth) die "the registry on $REGISTRY_URL requires authentication; berth's tests need an open one there (stop it, then rerun)" ;;
	*) die "something that is not an open Docker registry answers on $REGISTRY_URL; free $BERTH_REGISTRY_ADDR and rerun" ;;
	esac
	say "registry ready on $REGISTRY_URL"
}

main "$@"

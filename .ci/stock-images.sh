#!/usr/bin/env bash
# Build real stock images from Debian's own packages and push them to the local
# registry, for the tests that provision images as tenants bring them:
#
#   $BERTH_TEST_NGINX_IMAGE (127.0.0.1:5000/berth/nginx:stock)  nginx-light
#   $BERTH_TEST_REDIS_IMAGE (127.0.0.1:5000/berth/redis:stock)  redis-server
#
# Docker cannot pull from public registries here, so each image is a
# `debootstrap --variant=minbase` Debian with the package installed in a chroot,
# then `docker import`ed with the configuration its upstream Docker Hub image
# declares: nginx — no USER, CMD ["nginx","-g","daemon off;"], EXPOSE 80, logs
# linked to the container's stdout/stderr (as upstream's Dockerfile does; its
# STOPSIGNAL SIGQUIT is the one setting `docker import` cannot apply, and nginx
# stops on SIGTERM too); redis — no USER, VOLUME /data (owned by redis), WORKDIR
# /data, CMD ["redis-server"], EXPOSE 6379. Nothing berth-specific is added.
#
# Cached: the minbase tree is kept under $BERTH_CI_STATE/stock (a fresh machine
# builds it once, ~3 min), and an image whose label berth.stock.hash matches
# this script is not rebuilt; pushing is always done, so a registry with fresh
# storage is refilled.
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/stock-images.sh"
HASH=$(sha256sum "$SCRIPT" | cut -c1-64)
HASH_LABEL=berth.stock.hash
SUITE=bookworm
MIRROR="${BERTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
STOCK="$BERTH_CI_STATE/stock"
BASE="$STOCK/minbase-$SUITE"
NGINX_IMAGE="${BERTH_TEST_NGINX_IMAGE:-$BERTH_REGISTRY_ADDR/berth/nginx:stock}"
REDIS_IMAGE="${BERTH_TEST_REDIS_IMAGE:-$BERTH_REGISTRY_ADDR/berth/redis:stock}"

WORK=$(mktemp -d /var/tmp/berth-stock.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

ensure_base() {
	[ -x "$BASE/usr/bin/apt-get" ] && return 0
	command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
	say "debootstrap --variant=minbase $SUITE (once per machine)"
	rm -rf "$BASE.partial"
	mkdir -p "$STOCK"
	debootstrap --variant=minbase "$SUITE" "$BASE.partial" "$MIRROR" >"$STOCK/debootstrap.log" 2>&1 ||
		{ show_log_tail "$STOCK/debootstrap.log"; die "debootstrap failed"; }
	mv "$BASE.partial" "$BASE"
}

# rootfs NAME PACKAGE SETUP: a copy of the base with PACKAGE installed and the
# shell commands SETUP run in the chroot, cleaned of apt's caches.
rootfs() {
	local dir="$WORK/$1" pkg=$2 setup=$3
	cp -a "$BASE" "$dir"
	cp /etc/resolv.conf "$dir/etc/resolv.conf"
	say "installing $pkg in a chroot"
	chroot "$dir" /bin/sh -ec "
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends $pkg
		$setup
		apt-get clean
		rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /usr/share/locale/* /var/log/*.log
	" >"$WORK/$1.log" 2>&1 || { show_log_tail "$WORK/$1.log"; die "installing $pkg failed"; }
	: >"$dir/etc/resolv.conf"
	tar --numeric-owner -C "$dir" -cf "$WORK/$1.tar" .
}

image_hash() {
	docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}}" "$1" 2>/dev/null || true
}

# build NAME TAG PACKAGE SETUP CHANGE... imports the rootfs as TAG unless TAG is
# up to date, then pushes it.
build() {
	local name=$1 tag=$2 pkg=$3 setup=$4
	shift 4
	if [ "$(image_hash "$tag")" != "$HASH" ]; then
		ensure_base
		rootfs "$name" "$pkg" "$setup"
		local changes=(--change "LABEL $HASH_LABEL=$HASH")
		for c in "$@"; do changes+=(--change "$c"); done
		say "importing $tag"
		docker import --message "berth stock $name ($pkg from Debian $SUITE)" "${changes[@]}" "$WORK/$name.tar" "$tag" >/dev/null
	else
		say "$tag is up to date (hash ${HASH:0:12})"
	fi
	docker push "$tag" >"$WORK/push.log" 2>&1 || { cat "$WORK/push.log" >&2; die "docker push $tag failed"; }
	say "pushed $tag ($(grep -o 'digest: sha256:[0-9a-f]*' "$WORK/push.log" || echo 'digest unknown'))"
}

build nginx "$NGINX_IMAGE" nginx-light \
	'ln -sf /dev/stdout /var/log/nginx/access.log; ln -sf /dev/stderr /var/log/nginx/error.log' \
	'CMD ["nginx", "-g", "daemon off;"]' 'EXPOSE 80'
build redis "$REDIS_IMAGE" redis-server \
	'mkdir -p /data && chown redis:redis /data' \
	'VOLUME /data' 'WORKDIR /data' 'CMD ["redis-server"]' 'EXPOSE 6379'

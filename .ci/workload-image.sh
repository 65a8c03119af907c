#!/usr/bin/env bash
# Build berth's test workload image without any base image and push it to the
# local registry:
#
#   $BERTH_TEST_IMAGE          (127.0.0.1:5000/berth/workload:test)      VOLUME /data
#   $BERTH_TEST_IMAGE_NOVOLUME (<same repository>:novolume)               no VOLUME
#
# The rootfs holds only /workload (a static Go binary from
# dockerio/dockertest/workload), /etc/passwd and /etc/group (root, app uid 1000),
# /tmp, /run and /data. It is tarred reproducibly and `docker import`ed.
# Each image carries label berth.workload.hash = sha256(binary + this script);
# a tag whose label matches is not rebuilt. Pushing is always done (it costs
# a round trip when the registry already has the layers) so a registry with
# fresh storage is refilled.
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPT="$REPO_ROOT/.ci/workload-image.sh"
HASH_LABEL=berth.workload.hash
IMAGE_TEST="$BERTH_TEST_IMAGE"
IMAGE_REPO="$BERTH_TEST_IMAGE"
# Strip the tag, not a registry port: only a colon after the last slash is one.
case "${IMAGE_REPO##*/}" in *:*) IMAGE_REPO="${IMAGE_REPO%:*}" ;; esac
IMAGE_NOVOLUME="${BERTH_TEST_IMAGE_NOVOLUME:-$IMAGE_REPO:novolume}"

WORK=$(mktemp -d /tmp/berth-workload-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"

build_binary() {
	say "building dockerio/dockertest/workload (static)"
	mkdir -p "$ROOTFS"
	(cd "$REPO_ROOT" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '-s -w' \
		-o "$ROOTFS/workload" ./dockerio/dockertest/workload)
}

# build_rootfs_tar lays out the rest of the rootfs and tars it with fixed
# owners, modes and times, so equal inputs give an identical layer.
build_rootfs_tar() {
	mkdir -p "$ROOTFS/etc" "$ROOTFS/tmp" "$ROOTFS/run" "$ROOTFS/data"
	printf '%s\n' 'root:x:0:0:root:/:/sbin/nologin' 'app:x:1000:1000:app:/data:/sbin/nologin' >"$ROOTFS/etc/passwd"
	printf '%s\n' 'root:x:0:' 'app:x:1000:' >"$ROOTFS/etc/group"
	chmod 0755 "$ROOTFS" "$ROOTFS/etc" "$ROOTFS/run" "$ROOTFS/workload"
	chmod 0644 "$ROOTFS/etc/passwd" "$ROOTFS/etc/group"
	chmod 1777 "$ROOTFS/tmp"
	# Writable by root and by app: a fresh volume copies this mode.
	chmod 0777 "$ROOTFS/data"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
		-C "$ROOTFS" -cf "$WORK/rootfs.tar" .
}

image_hash() {
	docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}}" "$1" 2>/dev/null || true
}

# import_image TAG WITH_VOLUME imports the rootfs as TAG and removes the image
# TAG named before, when nothing else uses it.
import_image() {
	local tag=$1 with_volume=$2 old
	local changes=(
		--change 'ENTRYPOINT ["/workload"]'
		--change 'CMD ["serve"]'
		--change 'EXPOSE 8080'
		--change 'WORKDIR /'
		--change "LABEL $HASH_LABEL=$HASH"
	)
	if [ "$with_volume" = yes ]; then
		changes+=(--change 'VOLUME /data')
	fi
	old=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
	say "importing $tag"
	docker import --message "berth test workload $HASH" "${changes[@]}" "$WORK/rootfs.tar" "$tag" >/dev/null
	if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]; then
		# Never forced: an image still used by a container or another tag stays.
		docker rmi "$old" >/dev/null 2>&1 || true
	fi
}

push_image() {
	local tag=$1
	if ! docker push "$tag" >"$WORK/push.log" 2>&1; then
		cat "$WORK/push.log" >&2
		die "docker push $tag failed"
	fi
	say "pushed $tag ($(grep -o 'digest: sha256:[0-9a-f]*' "$WORK/push.log" || echo 'digest unknown'))"
}

main() {
	build_binary
	HASH=$(cat "$ROOTFS/workload" "$SCRIPT" | sha256sum | cut -c1-64)
	local tag with_volume built=no
	for tag in "$IMAGE_TEST" "$IMAGE_NOVOLUME"; do
		with_volume=no
		[ "$tag" = "$IMAGE_TEST" ] && with_volume=yes
		if [ "$(image_hash "$tag")" = "$HASH" ]; then
			say "$tag is up to date (hash ${HASH:0:12})"
		else
			[ "$built" = yes ] || build_rootfs_tar
			built=yes
			import_image "$tag" "$with_volume"
		fi
		push_image "$tag"
	done
}

main "$@"

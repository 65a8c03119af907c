# berth — one command runs the daemon (`make run`), one runs every test
# (`make test`). Both install and start what they need (Debian docker.io,
# docker-registry) on a fresh machine and reuse what is already running.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

# Go needs a HOME for its caches; CI may hand us an environment without one.
ifeq ($(strip $(HOME)),)
export HOME := $(shell getent passwd "$$(id -u)" | cut -d: -f6)
endif
export PATH := /usr/local/go/bin:$(HOME)/go/bin:/usr/local/sbin:/usr/sbin:/sbin:$(PATH)

# What the integration tests run and push to.
export BERTH_TEST_REGISTRY ?= 127.0.0.1:5000
export BERTH_TEST_IMAGE ?= $(BERTH_TEST_REGISTRY)/berth/workload:test
export BERTH_TEST_IMAGE_NOVOLUME ?= $(BERTH_TEST_REGISTRY)/berth/workload:novolume
# Stock Debian images as tenants bring them (nginx-light, redis-server): .ci/stock-images.sh.
export BERTH_TEST_NGINX_IMAGE ?= $(BERTH_TEST_REGISTRY)/berth/nginx:stock
export BERTH_TEST_REDIS_IMAGE ?= $(BERTH_TEST_REGISTRY)/berth/redis:stock
export BERTH_REGISTRY_ADDR := $(BERTH_TEST_REGISTRY)
# The loop-mounted btrfs (quotas enabled) the volume tests run on: .ci/btrfs-up.sh.
export BERTH_CI_STATE ?= /var/lib/berth-ci
export BERTH_TEST_BTRFS ?= $(BERTH_CI_STATE)/btrfs

# The variables above are for the tests; berthd would warn about each BERTH_*
# variable that names no configuration key, so `make run` starts it without them.
TEST_ENV := BERTH_TEST_REGISTRY BERTH_TEST_IMAGE BERTH_TEST_IMAGE_NOVOLUME BERTH_TEST_NGINX_IMAGE BERTH_TEST_REDIS_IMAGE \
	BERTH_REGISTRY_ADDR BERTH_CI_STATE BERTH_TEST_BTRFS

ARGS ?=
TESTFLAGS ?=
BENCH ?= .
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
BENCHTIMEOUT ?= 3h

.PHONY: run test crash bench soak build fmt vet workload-image stock-images docker-up registry-up btrfs-up btrfs-down promtool-up chromium-up

## run: start Docker if needed, then berthd on its embedded default config (extra flags: ARGS=...)
run: docker-up
	env $(foreach v,$(TEST_ENV),-u $(v)) go run ./cmd/berthd $(ARGS)

## test: Docker + local registry + test workload image + stock images + the btrfs test mount, then every test with -race (extra flags: TESTFLAGS=...),
## then the crash suite's dockerd restart on its own (it stops every container on the host). BERTH_REQUIRE_DOCKER=1:
## a Docker-gated test that cannot run fails instead of skipping, so green means every one of them ran.
## The btrfs test mount and its image are removed when the tests end, pass or fail.
test: docker-up registry-up workload-image stock-images btrfs-up promtool-up chromium-up
	trap 'echo "== make test: removing the btrfs test mount"; bash .ci/btrfs-down.sh' EXIT; \
	echo "== make test: go test -race ./... (every package; cmd/berthd, the longest, ~12 min with its independent tests 4 at a time)"; \
	BERTH_REQUIRE_DOCKER=1 go test -race -count=1 -timeout 45m -parallel 4 -skip 'TestCrashSuite_DockerdRestart|TestDockerdStopped' $(TESTFLAGS) ./... && \
	echo "== make test: the crash suite's dockerd restart and a 60 s dockerd stop (alone: they stop every container)" && \
	BERTH_REQUIRE_DOCKER=1 BERTH_CRASH_DOCKERD=1 go test -race -timeout 15m -count=1 -run 'TestCrashSuite_DockerdRestart|TestDockerdStopped' ./cmd/berthd

## crash: the crash suite at full size — kill -9 rounds, every actor kind crashed, dockerd restarted (CRASH_ROUNDS=10),
## the chaos drill with every actor kind crashed DRILL_CRASHES times, then the drill again at -cpu 1 beside a CPU hog
CRASH_ROUNDS ?= 10
DRILL_CRASHES ?= 10
crash: docker-up registry-up workload-image btrfs-up
	BERTH_CRASH_ROUNDS=$(CRASH_ROUNDS) BERTH_DRILL_CRASHES=$(DRILL_CRASHES) BERTH_CRASH_DOCKERD=1 go test -race -timeout 60m -count=1 -v -run 'TestCrashSuite' ./cmd/berthd
	BERTH_DRILL_CRASHES=$(DRILL_CRASHES) BERTH_DRILL_HOG=1 go test -race -cpu 1 -timeout 30m -count=1 -v -run 'TestCrashSuite_ChaosDrill' ./cmd/berthd

## bench: every benchmark against the real engine (BENCH=regexp BENCHTIME=1s BENCHCOUNT=1 BENCHTIMEOUT=3h;
## the isolation benchmark at 200, 500 and 1,000 leases alone takes about an hour here; the soak is make soak's)
bench: docker-up registry-up workload-image stock-images
	go test -run '^$$' -bench '$(BENCH)' -skip '^BenchmarkSoak$$' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout $(BENCHTIMEOUT) $(TESTFLAGS) ./...

## soak: the soak benchmark (not in make test): a child berthd through BERTH_SOAK_CYCLES provision → restart|update → close
## cycles over BERTH_SOAK_IMAGES distinct images pulled from the local registry, 1 in 10 retained and restored, kill -9 every
## BERTH_SOAK_KILL_EVERY cycles; reports state.db, journal, diagnostics, RSS, goroutines, image store, volume root and Docker
## objects per 1,000 closed leases and fails when one grows without bound (2,000 cycles take hours here: BENCHMARKS.md)
## (defaults 2000, 40, 300; more knobs in cmd/berthd/bench_soak_test.go)
soak: docker-up registry-up workload-image btrfs-up
	BERTH_SOAK_CYCLES=$${BERTH_SOAK_CYCLES:-2000} BERTH_SOAK_IMAGES=$${BERTH_SOAK_IMAGES:-40} BERTH_SOAK_KILL_EVERY=$${BERTH_SOAK_KILL_EVERY:-300} \
		BERTH_REQUIRE_DOCKER=1 go test -run '^$$' -bench BenchmarkSoak -benchtime 1x -timeout 6h $(TESTFLAGS) ./cmd/berthd

## build: compile every package and command
build:
	go build ./...

## fmt: gofmt every Go file in place
fmt:
	gofmt -l -w .

## vet: go vet every package
vet:
	go vet ./...

## workload-image: build and push $(BERTH_TEST_IMAGE) and its :novolume twin
workload-image: docker-up registry-up
	@echo "== $@: the test workload image"
	bash .ci/workload-image.sh

## stock-images: build (debootstrap, cached under $(BERTH_CI_STATE)/stock: ~2 min, instant when up to date) and push
## $(BERTH_TEST_NGINX_IMAGE) and $(BERTH_TEST_REDIS_IMAGE), Debian's nginx-light and redis-server with their upstream image config
stock-images: docker-up registry-up
	@echo "== $@: stock Debian nginx and redis images"
	bash .ci/stock-images.sh

## docker-up: install docker.io when missing, start dockerd (with a large address pool) when not running
docker-up:
	@echo "== $@: Docker"
	bash .ci/docker-up.sh

## promtool-up: install promtool (Debian prometheus, its server not started) when missing, for the alert-rule test
promtool-up:
	@echo "== $@: promtool for the alert rules"
	bash .ci/promtool-up.sh

## btrfs-up: install btrfs-progs when missing, loop-mount a btrfs image with quotas at $(BERTH_TEST_BTRFS) (reused when healthy)
btrfs-up:
	@echo "== $@: the btrfs test mount"
	bash .ci/btrfs-up.sh

## btrfs-down: unmount and delete the btrfs test image (only ours: label berth-ci)
btrfs-down:
	bash .ci/btrfs-down.sh

## registry-up: install docker-registry when missing, serve an open registry on $(BERTH_TEST_REGISTRY)
registry-up:
	@echo "== $@: the local registry"
	bash .ci/registry-up.sh

## chromium-up: install Debian's chromium when neither chromium nor chromium-browser is on PATH, and prove it runs headless (the console's browser test)
chromium-up:
	@echo "== $@: headless chromium for the console's browser test"
	bash .ci/chromium-up.sh

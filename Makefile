# pinfs build, test and CI entry points. CI runs .ci/run, which runs `make test`.

GO                := go
VERSITYGW_VERSION := v1.8.0
BIN               := $(CURDIR)/bin

.PHONY: build tools vet vet-race test fuzz-smoke fuzz demo bench bench-deps image clean distclean

# build stamps the commit (and whether the tree was modified) into
# bin/pinfs for pinfs version and the run record: -buildvcs=auto, also where
# GOFLAGS turns VCS stamping off.
build:
	$(GO) build -buildvcs=auto -o bin/pinfs ./cmd/pinfs

# tools installs the S3 server the integration tests run (integration/s3test).
tools: bin/versitygw

bin/versitygw:
	GOBIN=$(BIN) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

# vet checks every package as built without the race detector.
vet:
	$(GO) vet ./...

# test: vet, every test with -race, then fuzz-smoke. It takes about 9 min
# on a fresh clone here (2 cores; module cache warm, build cache empty),
# about 5 once the build cache is warm.
#
# vet runs with -race: it compiles every package it checks, and in the
# race build those are the very objects go test -race links next, so on a
# fresh clone the module is compiled once for both, not twice (about two
# minutes of compiling here). The files that build only without the race
# detector (*race_off*) are checked by the plain `go vet` of `make vet`.
# versitygw is built at the same time (-j2): each build leaves a core idle
# at times (links, long dependency chains) that the other fills.
#
# TESTP is how many packages go test runs at once: the integration
# packages mostly wait on servers, mounts and timeouts, so more than the
# 2 cores of the machines this runs on keeps them busy.
# The -timeout is a guard against a hang, not a budget: ./integration
# takes about 5 min alone and 8 under -p 4 here (issue 37's hostile-client
# tests added about a minute of CPU), close to a 10 min package limit on a
# slower machine.
# -tags pooldebug builds store/pool with poison: a released slot is filled
# with it and checked before its next use, so that a test that writes
# through a slice it no longer holds fails (see store/pool's doc).
# TESTFIRST are the packages that take longest (store/blocks about 2.5
# min alone with -race, the integration packages 2 and 1.5): go test
# starts packages in the order they are named, so naming these first
# keeps one of them from starting last and running on alone.
TESTP ?= 4
TESTFIRST := ./store/blocks ./integration ./integration/deploy ./store/s3store ./store/gate ./verify
test: export VERSITYGW := $(BIN)/versitygw
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target tools vet-race
	$(GO) test -race -tags pooldebug -count=1 -p $(TESTP) -timeout 14m $(TESTFIRST) ./...
	$(MAKE) --no-print-directory fuzz-smoke

# vet-race is go vet in the race build (see test).
vet-race:
	$(GO) vet -race -tags pooldebug ./...

# Fuzz targets: every `func FuzzX` in a _test.go file of the module, found
# with grep so that a new one is run without editing this file. go test
# takes one -fuzz target per package per run, so they run one by one. A
# failing input is saved under the package's testdata/fuzz/FuzzX/, where
# plain `go test` replays it from then on: commit it with the fix.
#
# FUZZSMOKE is a count of inputs, not a duration: Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" when
# a -fuzztime duration ends on a busy machine (golang/go#75804, fixed in Go
# 1.27); a count never reaches that deadline. `make fuzz` keeps a duration:
# a run that ends so, with no input written to testdata/fuzz, found nothing.
FUZZSMOKE ?= 20000x
FUZZTIME  ?= 5m

# fuzz-smoke runs each fuzz target for FUZZSMOKE inputs (about 30 s in all
# here, builds included); fuzz runs each for FUZZTIME, e.g. `make fuzz FUZZTIME=1h`.
fuzz-smoke:
	@$(call fuzz_all,$(FUZZSMOKE))

fuzz:
	@$(call fuzz_all,$(FUZZTIME))

# fuzz_all runs every fuzz target for $(1) and stops at the first failure.
define fuzz_all
	set -e; \
	for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$pkg/*_test.go); do \
			echo "fuzz $$pkg $$f for $(1)"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(1) $$pkg; \
		done; \
	done
endef

# demo pins demo/sample into a local store and shows what pinfs does with it.
demo: build
	demo/demo.sh

# BENCH_DEBS are the Debian packages make bench runs: the s3fs and b3sum
# baselines, fio for random reads, fuse3 (fusermount) and dd (coreutils).
BENCH_DEBS := s3fs b3sum fio fuse3 coreutils

# bench-deps installs the missing BENCH_DEBS with apt-get (root only).
bench-deps:
	@missing=""; for p in $(BENCH_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "bench-deps: $(BENCH_DEBS) installed"; \
	elif [ "$$(id -u)" != 0 ]; then echo "bench-deps: missing$$missing; run as root: apt-get install -y$$missing" >&2; exit 1; \
	else apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q$$missing; fi

# bench runs the end-to-end benchmark (integration/bench): versitygw, the
# baselines (raw aws-sdk-go-v2, s3fs, b3sum, the page cache) and pinfs
# in one run; prints every row of issue 10 side by side with a verdict
# per target (targets fixed in integration/bench/targets_test.go) and
# writes it to bench/results.md. Needs root (mounts, drop_caches) and
# /dev/fuse; as root it first installs what is missing (bench-deps); a
# baseline that cannot run says why in its cell. perf, for the profile
# section, is optional. Then the Go benchmarks of the hot spots (block
# verification, the read path and its caches, the metrics, the
# million-member index and tree, the consumed set and run show at a
# million members) go to bench/go-bench.txt.
# About 30 minutes here: 5 for the loopback rows, 8.5 for the shaped rows (issues 23
# and 38; PINFS_BENCH_ONLY=shaped runs them alone, PINFS_BENCH_S3FS=0 skips s3fs),
# 13 for issue 38's many readers on a local store (PINFS_BENCH_ONLY=concurrency, about
# 4 once its 16 GiB fixture exists; 32 GiB of free disk for a moment), 3.5 for
# the Go benchmarks. Issue 26's rows (1M and 10M members in a local store, a
# few minutes, 8 GB of disk) run only alone: PINFS_BENCH_ONLY=members.
bench: export VERSITYGW := $(BIN)/versitygw
bench: tools $(if $(filter 0,$(shell id -u)),bench-deps)
	PINFS_BENCH=1 $(GO) test -run TestBench -v -count=1 -timeout 40m ./integration/bench/
	$(GO) test -run '^$$' -bench . -benchtime 1s ./verify/b3 ./store/blocks ./cmd/internal/metrics | tee bench/go-bench.txt
	$(GO) test -run '^$$' -bench '1M|BuildTree' -benchtime 3x ./verify ./fs ./cmd/internal/mount ./cmd/internal/consumed ./cmd/internal/runs | tee -a bench/go-bench.txt

# IMAGE is the tag that make image gives the container image.
IMAGE ?= pinfs:dev
# REVISION is the commit the image says it was built from (Dockerfile ARG
# PINFS_REVISION); empty outside a git checkout.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)

# image builds the Dockerfile (a static pinfs on debian:12-slim with fuse3)
# with the first container builder that works: docker, then podman, then
# buildah. Where none works (not installed, or no engine to talk to) it
# says so in one line and fails. Not part of make test; the test that the
# binary is built static is (integration/deploy).
image:
	@why=""; \
	for b in docker podman buildah; do \
		if ! command -v $$b >/dev/null 2>&1; then why="$$why; $$b: not installed"; continue; fi; \
		if ! $$b info >/dev/null 2>&1; then why="$$why; $$b: no engine, $$b info fails"; continue; fi; \
		echo "image: building $(IMAGE) with $$b"; \
		if [ $$b = buildah ]; then buildah bud --build-arg PINFS_REVISION=$(REVISION) -t $(IMAGE) .; \
		else $$b build --build-arg PINFS_REVISION=$(REVISION) -t $(IMAGE) .; fi; \
		exit $$?; \
	done; \
	echo "image: no container builder works here ($${why#; }); install docker, podman or buildah with an engine" >&2; \
	exit 1

# clean keeps bin/versitygw (slow to rebuild); distclean drops it too.
clean:
	rm -f bin/pinfs

distclean: clean
	rm -rf bin

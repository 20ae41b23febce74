# pinfs build, test and CI entry points. CI runs .ci/run, which runs `make test`.

GO                := go
VERSITYGW_VERSION := v1.8.0
BIN               := $(CURDIR)/bin

.PHONY: build tools test fuzz-smoke fuzz demo bench clean distclean

build:
	$(GO) build -o bin/pinfs ./cmd/pinfs

# tools installs the S3 server the integration tests run (integration/s3test).
tools: bin/versitygw

bin/versitygw:
	GOBIN=$(BIN) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

# test: vet, every test with -race, then fuzz-smoke.
test: export VERSITYGW := $(BIN)/versitygw
test: tools
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 10m ./...
	$(MAKE) --no-print-directory fuzz-smoke

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

# bench runs the end-to-end benchmark (integration/bench): versitygw, the
# raw baselines and pinfs in one run; prints the table of ratios against
# the targets and writes it to bench/results.md. Needs root, /dev/fuse and
# fio (perf for the profile section is optional). Then the Go benchmarks
# of the hot spots (block verification, the read path and its caches, the
# metrics, the million-member index and tree, the consumed set and run
# show at a million members) go to bench/go-bench.txt.
# About 4 minutes here.
bench: export VERSITYGW := $(BIN)/versitygw
bench: tools
	PINFS_BENCH=1 $(GO) test -run TestBench -v -count=1 -timeout 40m ./integration/bench/
	$(GO) test -run '^$$' -bench . -benchtime 1s ./verify/b3 ./store/blocks ./cmd/internal/metrics | tee bench/go-bench.txt
	$(GO) test -run '^$$' -bench '1M|BuildTree' -benchtime 3x ./verify ./fs ./cmd/internal/mount ./cmd/internal/consumed ./cmd/internal/runs | tee -a bench/go-bench.txt

# clean keeps bin/versitygw (slow to rebuild); distclean drops it too.
clean:
	rm -f bin/pinfs

distclean: clean
	rm -rf bin

# pinfs build, test and CI entry points. CI runs .ci/run, which runs `make test`.

GO                := go
VERSITYGW_VERSION := v1.8.0
BIN               := $(CURDIR)/bin

.PHONY: build tools test demo bench clean distclean

build:
	$(GO) build -o bin/pinfs ./cmd/pinfs

# tools installs the S3 server the integration tests run (integration/s3test).
tools: bin/versitygw

bin/versitygw:
	GOBIN=$(BIN) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

test: export VERSITYGW := $(BIN)/versitygw
test: tools
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 10m ./...

# demo pins demo/sample into a local store and shows what pinfs does with it.
demo: build
	demo/demo.sh

# bench runs the end-to-end benchmark (integration/bench): versitygw, the
# raw baselines and pinfs in one run; prints the table of ratios against
# the targets and writes it to bench/results.md. Needs root, /dev/fuse and
# fio (perf for the profile section is optional). Then the Go benchmarks
# of the hot spots (block verification, the read path and its caches, the
# metrics, the million-member index and tree) go to bench/go-bench.txt.
# About 4 minutes here.
bench: export VERSITYGW := $(BIN)/versitygw
bench: tools
	PINFS_BENCH=1 $(GO) test -run TestBench -v -count=1 -timeout 40m ./integration/bench/
	$(GO) test -run '^$$' -bench . -benchtime 1s ./verify/b3 ./store/blocks ./cmd/internal/metrics | tee bench/go-bench.txt
	$(GO) test -run '^$$' -bench '1M|BuildTree' -benchtime 3x ./verify ./fs ./cmd/internal/mount | tee -a bench/go-bench.txt

# clean keeps bin/versitygw (slow to rebuild); distclean drops it too.
clean:
	rm -f bin/pinfs

distclean: clean
	rm -rf bin

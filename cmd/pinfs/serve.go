package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/mount"
	"github.com/pinfs/pinfs/store/origin"
)

var serveCmd = &command{
	name:  "serve",
	args:  "--store STORE --listen HOST:PORT [flags]",
	short: "serve a store's verified content over HTTP, as the origin of a cache tier",
	long: `Serve the content of STORE over HTTP for mounts behind a tier of HTTP
caches (nginx, Varnish, a CDN; docs/cluster.md): manifests, member tables
and outboards by their digests, and member blocks by their BLAKE3 digest,
read at their pinned versions and verified before they are answered. Every
URL names immutable bytes (Cache-Control: immutable); a URL that names no
content is refused (400), content the store lacks is 404. Mounts read
through the tier with --store http://TIER:PORT and need no credentials.

The origin never writes to the store. It serves until SIGINT or SIGTERM,
then lets the requests in flight finish. Readiness: GET /-/ready;
Prometheus metrics: GET /-/metrics.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeURL := storeFlag(fs)
		listen := fs.String("listen", "", "`HOST:PORT` to serve on")
		cacheDir := fs.String("cache-dir", defaultCacheDir(), "`DIR` for verified metadata and member table indexes (DIR/meta)")
		cacheMem := byteSize(512 << 20)
		fs.Var(&cacheMem, "cache-mem", "memory block cache `SIZE`. Default: what the memory target leaves beside readahead "+
			"and the blocks of requests in flight (see --memory-target), the default below without one; given, it wins")
		mem := memoryTargetFlag(fs)
		maxReq := fs.Int("max-requests", 64, "`N` requests answered at once; more wait (up to 10 s, then 503 with Retry-After)")
		readTimeout := fs.Duration("read-timeout", 60*time.Second, "`DURATION` that loading one block from the store may take, retries included")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usagef("want no arguments, got %q", args)
			}
			if *listen == "" {
				return usagef("--listen HOST:PORT is required")
			}
			if *maxReq < 1 {
				return usagef("--max-requests %d: want at least 1", *maxReq)
			}
			if err := needStore(*storeURL); err != nil {
				return err
			}
			if *cacheDir == "" {
				return usagef("no default cache dir: $XDG_CACHE_HOME and $HOME are unset; pass --cache-dir DIR")
			}
			if err := mount.PrepareCacheDir(*cacheDir); err != nil {
				return err
			}
			target, err := mem.value()
			if err != nil {
				return err
			}
			st, err := openStore(ctx, *storeURL)
			if err != nil {
				return err
			}
			sizes, bp, err := serveMemory(target, int64(cacheMem), mem.given("cache-mem"), logFrom(ctx))
			if err != nil {
				return err
			}
			defer bp.Close() // after Run, which closes its block reader
			return origin.Run(ctx, origin.Options{Store: st, Listen: *listen, CacheDir: *cacheDir,
				CacheMem: sizes.Mem, ReadaheadBudget: sizes.Readahead, Pool: bp,
				MaxRequests: *maxReq, ReadTimeout: *readTimeout, Log: logFrom(ctx), Out: out})
		}
	},
}

package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/tiertest"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// clusterReaders is how many readers a node runs over the small files.
const clusterReaders = smallReaders

// cluster is the issue 27 scenario: "nodes" (a node is a mount of each
// snapshot with cache dirs of its own) read the 1 GiB member and the
// 2000 × 256 KiB through one nginx (deploy/nginx/pinfs-tier.conf) in front
// of one pinfs serve, which reads versitygw through the shaping proxy
// that counts member GETs. The nodes hold no credentials. A node reads
// the big member with one sequential reader, then the small files with
// clusterReaders.
func (b *bench) cluster(t *testing.T) {
	s, err := shapeFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	p := b.startProxyProc(t, s)
	b.proxyPid = p.pid
	t.Cleanup(func() { b.proxyPid = 0 })
	b.note("cluster rows: versitygw behind one shaping proxy (integration/faultproxy, a process of its own): %v before each "+
		"response, each body paced at %s (%s, %s); in the cluster rows only the origin and the direct mount go through it, "+
		"the nodes reach nginx on loopback, unshaped (a cluster network)", s.Latency, rateText(s.Rate), latencyEnv, rateEnv)
	c := &clusterRun{bench: b, proxy: p,
		s3env: append(slices.Clone(b.env), "AWS_ENDPOINT_URL_S3="+p.url, "AWS_ENDPOINT_URL="+p.url),
		big:   b.members(t, b.bigDigest), small: b.members(t, b.smallDigest)}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_") && !strings.HasPrefix(e, "PINFS_STORE=") {
			c.noCreds = append(c.noCreds, e)
		}
	}
	b.warmServer(t, append([]smallObj{b.bigObj()}, b.small...)...)

	// One node reading S3 directly, then one node through a cold tier.
	direct := c.node(t, "cluster direct", storeURL, c.s3env)
	get0 := p.memberGETs(t)
	dr := direct.read(t)
	directGETs := p.memberGETs(t) - get0
	direct.release(t)
	origin, nginx := c.tier(t)
	first := c.node(t, "cluster node 1", nginx.URL, c.noCreds)
	get0 = p.memberGETs(t)
	fr := first.read(t)
	one := p.memberGETs(t) - get0
	first.release(t)
	b.infoRow(row{scenario: "cluster: member GETs at S3, one node through the tier vs the same node direct",
		pinfs: fmt.Sprintf("%d", one), other: fmt.Sprintf("%d direct", directGETs),
		ratio: fmt.Sprintf("%.2f", float64(one)/float64(directGETs))})
	b.judge(row{scenario: "cluster: cold node 1 through tier and origin, 1 GiB member (dd-like, 1 MiB reads)",
		pinfs: gbs(rate(bigSize, fr.big)), other: gbs(rate(bigSize, dr.big)) + " direct from S3",
		cpu: "CPU through the tier: " + fr.bigCPU + "; direct: " + dr.bigCPU},
		fr.big.Seconds()/dr.big.Seconds(), false, 1/targetClusterColdVsDirect, "")
	b.judge(row{scenario: fmt.Sprintf("cluster: cold node 1 through tier and origin, 2000 × 256 KiB (%d readers), wall time", clusterReaders),
		pinfs: secs(fr.small), other: secs(dr.small) + " direct from S3",
		cpu: "CPU through the tier: " + fr.smallCPU + "; direct: " + dr.smallCPU},
		fr.small.Seconds()/dr.small.Seconds(), false, 1/targetClusterColdVsDirect, "")

	// Nodes 2–4, one after another, read what the tier holds; then a
	// plain HTTP client reads the same blocks from it.
	get0 = p.memberGETs(t)
	var later []nodeRead
	for i := 2; i <= 4; i++ {
		nd := c.node(t, fmt.Sprintf("cluster node %d", i), nginx.URL, c.noCreds)
		later = append(later, nd.read(t))
		nd.release(t)
	}
	four := one + p.memberGETs(t) - get0
	rawBig, rawSmall := c.rawTier(t, nginx.URL, false)
	hashBig, hashSmall := c.rawTier(t, nginx.URL, true)
	var bigCells, smallCells []string
	var bigSum, smallSum time.Duration
	for _, r := range later {
		bigSum += r.big
		smallSum += r.small
		bigCells = append(bigCells, gbs(rate(bigSize, r.big)))
		smallCells = append(smallCells, secs(r.small))
	}
	n := time.Duration(len(later))
	b.judge(row{scenario: "cluster: member GETs at S3, 4 nodes one after another vs node 1 alone",
		pinfs: fmt.Sprintf("%d", four), other: fmt.Sprintf("%d (node 1)", one)},
		float64(four)/float64(one), false, targetClusterGETs, "")
	b.judge(row{scenario: "cluster: nodes 2–4, 1 GiB member from the tier's cache vs an HTTP client GETting its blocks (16 at a time)",
		pinfs: strings.Join(bigCells, ", "), other: gbs(rate(bigSize, rawBig)) + " raw HTTP", cpu: "node 2: " + later[0].bigCPU},
		rawBig.Seconds()/(bigSum/n).Seconds(), true, targetClusterWarmVsRaw, "")
	b.judge(row{scenario: fmt.Sprintf("cluster: nodes 2–4, 2000 × 256 KiB from the tier's cache (%d readers) vs an HTTP client (16 at a time), wall time", clusterReaders),
		pinfs: strings.Join(smallCells, ", "), other: secs(rawSmall) + " raw HTTP", cpu: "node 2: " + later[0].smallCPU},
		rawSmall.Seconds()/(smallSum/n).Seconds(), true, targetClusterWarmVsRaw, "")
	b.infoRow(row{scenario: "cluster: the same HTTP client hashing each block (BLAKE3, as a node verifies), 1 GiB member; 2000 × 256 KiB",
		pinfs: gbs(rate(bigSize, hashBig)) + "; " + secs(hashSmall), other: gbs(rate(bigSize, rawBig)) + "; " + secs(rawSmall) + " not hashing",
		ratio: fmt.Sprintf("%.2f; %.2f", rawBig.Seconds()/hashBig.Seconds(), rawSmall.Seconds()/hashSmall.Seconds())})
	b.note("cluster: the origin answered %s", origin.blockCount(t))

	// Four new nodes at the same moment, on a new tier and origin.
	_, nginx2 := c.tier(t)
	var nodes []*clusterNode
	for i := 1; i <= 4; i++ {
		nodes = append(nodes, c.node(t, fmt.Sprintf("cluster together %d", i), nginx2.URL, c.noCreds))
	}
	get0 = p.memberGETs(t)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, nd := range nodes {
		wg.Go(func() { <-start; nd.read(t) })
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	together := p.memberGETs(t) - get0
	b.judge(row{scenario: "cluster: member GETs at S3, 4 new nodes at the same moment (new tier) vs node 1 alone",
		pinfs: fmt.Sprintf("%d in %s", together, secs(time.Since(t0))), other: fmt.Sprintf("%d (node 1)", one)},
		float64(together)/float64(one), false, targetClusterGETs, "")
}

// clusterRun is the state of the cluster rows.
type clusterRun struct {
	*bench
	proxy      *proxyProc
	originPid  int // the current tier's
	nginxPid   int
	s3env      []string // credentials, S3 through the proxy
	noCreds    []string // no AWS_ variable at all
	big, small []verify.Member
}

// clusterOrigin is a running pinfs serve.
type clusterOrigin struct{ addr string }

// tier starts a new origin (S3 through the proxy, a new cache dir) and a
// new nginx in front of it.
func (c *clusterRun) tier(t *testing.T) (*clusterOrigin, *tiertest.Tier) {
	addr, cmd := tiertest.Origin(t, c.bin, c.s3env, "--store", storeURL, "--cache-dir", t.TempDir())
	ng := tiertest.Nginx(t, addr)
	c.originPid, c.nginxPid = cmd.Process.Pid, ng.Pid
	return &clusterOrigin{addr: addr}, ng
}

// blockCount returns the origin's count of block answers, as its
// metrics say.
func (o *clusterOrigin) blockCount(t *testing.T) string {
	resp, err := http.Get("http://" + o.addr + "/-/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "pinfs_origin_requests_total{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// clusterNode is one node: a mount of each snapshot.
type clusterNode struct {
	c          *clusterRun
	big, small *mount
}

// node mounts both snapshots from store with env, new cache dirs each.
// The cache dirs are on tmpfs (/dev/shm) and go once the node has read:
// a node of a cluster has a local disk of its own, while here nine nodes
// and two tiers would share one disk and wait on its writeback.
func (c *clusterRun) node(t *testing.T, name, store string, env []string) *clusterNode {
	n := &clusterNode{c: c}
	for _, s := range []struct {
		m      **mount
		digest string
	}{{&n.big, c.bigDigest}, {&n.small, c.smallDigest}} {
		dir, err := os.MkdirTemp("/dev/shm", "pinfs-bench-node-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		*s.m = c.mount(t, name, env, s.digest, store, dir)
	}
	return n
}

// release unmounts the node and removes its cache dirs.
func (n *clusterNode) release(t *testing.T) {
	for _, m := range []*mount{n.big, n.small} {
		m.unmount(t)
		os.RemoveAll(m.cache)
	}
}

// nodeRead is how long a node took for each snapshot, and the CPU
// seconds per process group it took (cpuCell).
type nodeRead struct {
	big, small       time.Duration
	bigCPU, smallCPU string
}

// cpuAt samples the CPU seconds used so far by the node's mounts, the
// current origin and nginx, and S3 (the shaping proxy and versitygw).
func (n *clusterNode) cpuAt() [4]float64 {
	c := n.c
	at := func(pids ...int) (s float64) {
		for _, p := range pids {
			v, _ := procCPU(p)
			s += v
		}
		return s
	}
	return [4]float64{at(n.big.pid, n.small.pid), at(c.originPid), at(c.nginxPid), at(c.proxy.pid, c.serverPid())}
}

// cpuCell prints the CPU seconds between two samples of cpuAt, by group;
// groups that used none (a direct node has no origin) are left out.
func cpuCell(a, b [4]float64) string {
	var out []string
	for i, name := range []string{"node", "origin", "nginx", "S3"} {
		if d := b[i] - a[i]; d >= 0.005 {
			out = append(out, fmt.Sprintf("%s %.2f", name, d))
		}
	}
	return strings.Join(out, ", ") + " s"
}

// read reads the big member, then the small files; a failure fails t.
func (n *clusterNode) read(t *testing.T) nodeRead {
	var r nodeRead
	c0, t0 := n.cpuAt(), time.Now()
	if err := readFiles([]string{filepath.Join(n.big.dir, bigMember)}, n.c.big, 1); err != nil {
		t.Error(err)
	}
	r.big = time.Since(t0)
	c1 := n.cpuAt()
	r.bigCPU = cpuCell(c0, c1)
	paths := make([]string, len(n.c.small))
	for i, m := range n.c.small {
		paths[i] = filepath.Join(n.small.dir, m.Path)
	}
	t0 = time.Now()
	if err := readFiles(paths, n.c.small, clusterReaders); err != nil {
		t.Error(err)
	}
	r.small = time.Since(t0)
	r.smallCPU = cpuCell(c1, n.cpuAt())
	return r
}

// rawTier GETs every block of the big member, then of the small ones,
// from the tier with a plain HTTP client, 16 at a time, and returns the
// wall times. With hash it also hashes each block (BLAKE3), the least a
// client that verifies must do.
func (c *clusterRun) rawTier(t *testing.T, tierURL string, hash bool) (big, small time.Duration) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	urls := func(digest string, ms []verify.Member) []string {
		var us []string
		for i, m := range ms {
			d, err := b3.Parse(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			for k := int64(0); k*tier.BlockSize < m.Size; k++ {
				bl := tier.Block{Hex: d.Hex(), Index: k, Snapshot: digest, Member: i}
				us = append(us, tierURL+"/"+bl.Path()+"?"+bl.Query())
			}
		}
		return us
	}
	get := func(us []string) time.Duration {
		t0 := time.Now()
		err := parallel(len(us), 16, func(i int, buf []byte) error {
			resp, err := client.Get(us[i])
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Cache-Status") != "HIT" {
				return fmt.Errorf("GET %s: %s, cache %q: want 200 from the tier's cache", us[i], resp.Status, resp.Header.Get("X-Cache-Status"))
			}
			if !hash {
				_, err = io.CopyBuffer(io.Discard, resp.Body, buf)
				return err
			}
			n, err := io.ReadFull(resp.Body, buf)
			if err != nil && err != io.ErrUnexpectedEOF {
				return err
			}
			sink.Add(uint64(b3.Of(buf[:n])[0]))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	return get(urls(c.bigDigest, c.big)), get(urls(c.smallDigest, c.small))
}

// sink keeps the hashes of rawTier from being optimized away.
var sink atomic.Uint64

func rate(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e9 / d.Seconds() }

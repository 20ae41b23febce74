package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pinfs/pinfs/integration/repo"
)

// The cluster setup of docs/cluster.md: the nginx configuration that the
// integration tests run, and the manifests that deploy it.
const (
	tierConf     = "deploy/nginx/pinfs-tier.conf"
	tierFile     = "deploy/kubernetes/pinfs-tier.yaml"
	originFile   = "deploy/kubernetes/pinfs-origin.yaml"
	policyFile   = "deploy/kubernetes/network-policy.yaml"
	trainTier    = "deploy/kubernetes/train-tier.yaml"
	tierStoreURL = "http://pinfs-tier:8080"
)

// cluster is what the cluster manifests hold, by kind and name.
type cluster struct {
	conf        string
	configMaps  map[string]*corev1.ConfigMap
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	policies    map[string]*networkingv1.NetworkPolicy
	train       []document // train-tier.yaml
}

// loadCluster decodes the cluster manifests under root (strictly, as
// TestManifests does) and the nginx configuration.
func loadCluster(t *testing.T, root string) *cluster {
	t.Helper()
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := &cluster{conf: string(read(tierConf)), configMaps: map[string]*corev1.ConfigMap{},
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		policies: map[string]*networkingv1.NetworkPolicy{}}
	for _, f := range []string{tierFile, originFile, policyFile, trainTier} {
		docs, errs := decodeFile(f, read(f))
		for _, err := range errs {
			t.Fatal(err)
		}
		if f == trainTier {
			c.train = docs
		}
		for _, d := range docs {
			switch o := d.obj.(type) {
			case *corev1.ConfigMap:
				c.configMaps[o.Name] = o
			case *appsv1.Deployment:
				c.deployments[o.Name] = o
			case *corev1.Service:
				c.services[o.Name] = o
			case *networkingv1.NetworkPolicy:
				c.policies[o.Name] = o
			}
		}
	}
	return c
}

// confValue returns the argument of the nginx directive name in the
// configuration (the first one), up to its ';'.
func confValue(conf, name string) string {
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `\s+([^;]+);`).FindStringSubmatch(conf)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// checkCluster returns every way the cluster manifests disagree with the
// nginx configuration, with one another, or with a credential-less node.
func checkCluster(c *cluster) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	// The ConfigMap is the shipped configuration, byte for byte.
	cm := c.configMaps["pinfs-tier"]
	if cm == nil {
		bad("%s: no ConfigMap pinfs-tier", tierFile)
	} else if cm.Data["pinfs-tier.conf"] != c.conf {
		bad("%s: ConfigMap pinfs-tier's pinfs-tier.conf is not %s byte for byte: copy it again", tierFile, tierConf)
	}

	// nginx runs it, with the cache dir on a volume.
	tier := c.deployments["pinfs-tier"]
	if tier == nil {
		bad("%s: no Deployment pinfs-tier", tierFile)
		return errs
	}
	spec := &tier.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		bad("pinfs-tier: %d containers, want the one nginx", len(spec.Containers))
		return errs
	}
	ng := &spec.Containers[0]
	argv := append(slices.Clone(ng.Command), ng.Args...)
	i := slices.Index(argv, "-c")
	if i < 0 || i+1 >= len(argv) {
		bad("pinfs-tier: nginx %q without -c FILE: it would not run the shipped configuration", argv)
	} else {
		vm, rel := volumeAt(ng, argv[i+1])
		switch {
		case vm == nil:
			bad("pinfs-tier: -c %s is on no volume", argv[i+1])
		case volumeSource(spec, vm.Name).ConfigMap == nil || volumeSource(spec, vm.Name).ConfigMap.Name != "pinfs-tier" ||
			rel != "/pinfs-tier.conf":
			bad("pinfs-tier: -c %s is not the key pinfs-tier.conf of ConfigMap pinfs-tier", argv[i+1])
		}
	}
	cachePath := strings.Fields(confValue(c.conf, "proxy_cache_path"))
	if len(cachePath) == 0 {
		bad("%s: no proxy_cache_path", tierConf)
	} else if vm, rel := volumeAt(ng, cachePath[0]); vm == nil || rel != "/" {
		bad("pinfs-tier: the cache dir %s is not a volume of its own: the container's filesystem would hold the cache", cachePath[0])
	}

	// The Services the configuration and the nodes name.
	listen := confValue(c.conf, "listen")
	upstream := strings.Fields(confValue(c.conf, "server"))
	if len(upstream) == 0 {
		bad("%s: no upstream server", tierConf)
		return errs
	}
	oHost, oPort, _ := strings.Cut(upstream[0], ":")
	for _, s := range []struct{ name, port, pod string }{{"pinfs-tier", listen, "pinfs-tier"}, {oHost, oPort, "pinfs-origin"}} {
		svc, d := c.services[s.name], c.deployments[s.pod]
		switch {
		case svc == nil:
			bad("no Service %s (the configuration names %s:%s)", s.name, s.name, s.port)
		case d == nil:
			bad("no Deployment %s behind Service %s", s.pod, s.name)
		case len(svc.Spec.Ports) != 1 || fmt.Sprint(svc.Spec.Ports[0].Port) != s.port || svc.Spec.Ports[0].TargetPort.String() != s.port:
			bad("Service %s: ports %v, want %s", s.name, svc.Spec.Ports, s.port)
		case !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0:
			bad("Service %s selects %v, not the pods of Deployment %s (%v)", s.name, svc.Spec.Selector, s.pod, d.Spec.Template.Labels)
		}
	}

	// Who reaches whom: the policies select the tier's and the origin's
	// pods, and let in the training pods and the tier.
	selects := func(policy string, d *appsv1.Deployment, from map[string]string) {
		p := c.policies[policy]
		if p == nil || d == nil {
			bad("no NetworkPolicy %s, or no Deployment for it", policy)
			return
		}
		if !labels.SelectorFromSet(p.Spec.PodSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
			bad("NetworkPolicy %s selects %v, not the pods of %s", policy, p.Spec.PodSelector.MatchLabels, d.Name)
		}
		in := false
		for _, r := range p.Spec.Ingress {
			for _, f := range r.From {
				if f.PodSelector != nil && labels.SelectorFromSet(f.PodSelector.MatchLabels).Matches(labels.Set(from)) {
					in = true
				}
			}
		}
		if !in {
			bad("NetworkPolicy %s lets no pod labelled %v in", policy, from)
		}
	}
	selects("pinfs-origin", c.deployments["pinfs-origin"], tier.Spec.Template.Labels)

	// The training Job: its pods may reach the tier, read through it, and
	// hold no credentials at all.
	jobs := 0
	for _, d := range c.train {
		spec := podSpecOf(d.obj)
		if spec == nil {
			continue
		}
		jobs++
		selects("pinfs-tier", tier, podLabels(d.obj))
		stores := 0
		for _, pc := range containersOf(d.name, spec) {
			if cred := credentials(spec, pc.c); len(cred) > 0 {
				bad("%s: %s: a node reading through the tier holds no storage credentials", pc.where, strings.Join(cred, ", "))
			}
			for _, e := range pc.c.Env {
				if strings.HasPrefix(e.Name, "AWS_") {
					bad("%s: env %s: a node reading through the tier needs no AWS configuration", pc.where, e.Name)
				}
			}
			args, ok := pinArgs(*pc.c)
			if !ok {
				continue
			}
			p, err := parseCmd(pc, args)
			if err != nil || p.sub != "mount" && p.sub != "warm" {
				continue
			}
			store, ok := p.flag("store")
			if !ok {
				if e := envVar(*pc.c, "PINFS_STORE"); e != nil {
					store = e.Value
				}
			}
			if store != tierStoreURL {
				bad("%s: pinfs %s reads %q, want the tier %s", pc.where, p.sub, store, tierStoreURL)
			}
			if fb, ok := p.flag("fallback-store"); ok {
				bad("%s: --fallback-store %s needs the store's credentials: not in this Job", pc.where, fb)
			}
			stores++
		}
		if stores == 0 {
			bad("%s: no pinfs mount or warm", d.name)
		}
	}
	if jobs == 0 {
		bad("%s: no workload", trainTier)
	}
	return errs
}

// podTemplateMeta returns the metadata of a workload's pods (nil for a
// kind without pods).
func podTemplateMeta(obj any) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.ObjectMeta
	case *batchv1.Job:
		return &o.Spec.Template.ObjectMeta
	case *appsv1.Deployment:
		return &o.Spec.Template.ObjectMeta
	}
	return nil
}

// podLabels returns the labels of a workload's pods.
func podLabels(obj any) map[string]string {
	if m := podTemplateMeta(obj); m != nil {
		return m.Labels
	}
	return nil
}

// volumeSource returns the volume of spec named name (zero if none).
func volumeSource(spec *corev1.PodSpec, name string) corev1.VolumeSource {
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v.VolumeSource
		}
	}
	return corev1.VolumeSource{}
}

// TestClusterManifests: the tier Deployment runs the shipped nginx
// configuration, the Services and network policies fit it and each other,
// and the training Job reads through the tier without credentials.
func TestClusterManifests(t *testing.T) {
	c := loadCluster(t, repo.MustRoot(t))
	for _, err := range checkCluster(c) {
		t.Error(err)
	}
}

// TestClusterRefusals: each of these edits to the cluster manifests is
// caught.
func TestClusterRefusals(t *testing.T) {
	root := repo.MustRoot(t)
	for name, edit := range map[string]func(c *cluster){
		"conf differs": func(c *cluster) { c.configMaps["pinfs-tier"].Data["pinfs-tier.conf"] += "# local edit\n" },
		"no -c": func(c *cluster) {
			c.deployments["pinfs-tier"].Spec.Template.Spec.Containers[0].Command = []string{"nginx"}
		},
		"cache in the container": func(c *cluster) {
			ng := &c.deployments["pinfs-tier"].Spec.Template.Spec.Containers[0]
			ng.VolumeMounts = slices.DeleteFunc(ng.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "cache" })
		},
		"tier port":      func(c *cluster) { c.services["pinfs-tier"].Spec.Ports[0].Port = 80 },
		"origin service": func(c *cluster) { delete(c.services, "pinfs-origin") },
		"no client label": func(c *cluster) {
			for _, d := range c.train {
				if spec := podTemplateMeta(d.obj); spec != nil {
					delete(spec.Labels, "pinfs-tier-client")
				}
			}
		},
		"credentials": func(c *cluster) {
			for _, d := range c.train {
				if spec := podSpecOf(d.obj); spec != nil {
					spec.InitContainers[2].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "pinfs-s3"}}}}
				}
			}
		},
		"store is S3": func(c *cluster) {
			for _, d := range c.train {
				if spec := podSpecOf(d.obj); spec != nil {
					for i := range spec.InitContainers {
						for j, e := range spec.InitContainers[i].Env {
							if e.Name == "PINFS_STORE" {
								spec.InitContainers[i].Env[j].Value = "s3://pinstore/p"
							}
						}
					}
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := loadCluster(t, root)
			edit(c)
			if errs := checkCluster(c); len(errs) == 0 {
				t.Fatal("not caught")
			} else {
				t.Log(errs[0])
			}
		})
	}
}

package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mysqlha/mysqlha/agent"
)

// built is the output of one kustomize build: every object decoded into
// client-go's typed structs (strictly: an unknown or duplicate field fails),
// and, for the kinds client-go does not know (the Prometheus Operator's),
// as unstructured objects. all keeps every object, in build order, for
// sending to an API server.
type built struct {
	dir     string
	typed   []runtime.Object
	custom  []*unstructured.Unstructured
	all     []*unstructured.Unstructured
	rawYAML map[string][]byte // by "Kind/name"
}

var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// kustomizeBuild runs kustomize (the library behind kubectl apply -k) on
// dir, as `kustomize build dir` would, and decodes the result.
func kustomizeBuild(t *testing.T, dir string) *built {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b := &built{dir: dir, rawYAML: map[string][]byte{}}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(mustJSON(t, r)); err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		b.all = append(b.all, u)
		b.rawYAML[u.GetKind()+"/"+u.GetName()] = y
		obj, _, err := strictDecoder.Decode(y, nil, nil)
		switch {
		case runtime.IsNotRegisteredError(err):
			b.custom = append(b.custom, u)
		case err != nil:
			t.Fatalf("kustomize build %s: decoding %s/%s strictly: %v", dir, u.GetKind(), u.GetName(), err)
		default:
			b.typed = append(b.typed, obj)
		}
	}
	return b
}

func mustJSON(t *testing.T, r interface{ MarshalJSON() ([]byte, error) }) []byte {
	t.Helper()
	j, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// only returns the one object of type T, failing when there is not exactly one.
func only[T runtime.Object](t *testing.T, b *built) T {
	t.Helper()
	var found []T
	for _, o := range b.typed {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%s: want exactly one %T, got %d", b.dir, zero, len(found))
	}
	return found[0]
}

// kinds lists "Kind/name" of every object, sorted.
func (b *built) kinds() []string {
	var out []string
	for _, u := range b.all {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	slices.Sort(out)
	return out
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func mustContainer(t *testing.T, cs []corev1.Container, name string) *corev1.Container {
	t.Helper()
	c := findContainer(cs, name)
	if c == nil {
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		t.Fatalf("no container %q (have %v)", name, names)
	}
	return c
}

func findVolume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func findMount(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func findEnv(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// podEnv are the values the kubelet would give the downward API and
// Secret references in the tests that run the pods' scripts here.
type podEnv struct {
	fields  map[string]string // fieldPath -> value
	secrets map[string]string // Secret key -> value
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// resolveEnv turns c's env into NAME=value pairs as the kubelet does:
// $(VAR) expands variables defined earlier in the list, fieldRef and
// secretKeyRef take their values from pe. An unresolvable source fails.
func resolveEnv(t *testing.T, c *corev1.Container, pe podEnv) []string {
	t.Helper()
	vals := map[string]string{}
	var out []string
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = varRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
				name := varRef.FindStringSubmatch(ref)[1]
				if val, ok := vals[name]; ok {
					return val
				}
				return ref // the kubelet leaves unknown references as they are
			})
		case e.ValueFrom.FieldRef != nil:
			val, ok := pe.fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("container %s env %s: no test value for fieldRef %s", c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			v = val
		case e.ValueFrom.SecretKeyRef != nil:
			val, ok := pe.secrets[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("container %s env %s: no test value for Secret key %s", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Key)
			}
			v = val
		default:
			t.Fatalf("container %s env %s: unsupported source", c.Name, e.Name)
		}
		vals[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out
}

// resolvePodEnv is resolveEnv, with the container's Secret volumes
// written into a temporary directory from pe.secrets and every value that
// names a file in one of them pointed there: the scripts then read the
// passwords as they would in the pod.
func resolvePodEnv(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, pe podEnv) []string {
	t.Helper()
	env := resolveEnv(t, c, pe)
	for _, m := range c.VolumeMounts {
		vol := findVolume(spec, m.Name)
		if vol == nil || vol.Secret == nil {
			continue
		}
		dir := t.TempDir()
		for _, it := range vol.Secret.Items {
			val, ok := pe.secrets[it.Key]
			if !ok {
				t.Fatalf("volume %s: no test value for Secret key %s", vol.Name, it.Key)
			}
			if err := os.WriteFile(filepath.Join(dir, it.Path), []byte(val+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for i, e := range env {
			name, v, _ := strings.Cut(e, "=")
			if rest, ok := strings.CutPrefix(v, m.MountPath+"/"); ok {
				env[i] = name + "=" + filepath.Join(dir, rest)
			}
		}
	}
	return env
}

// cleanEnv is a minimal environment for running the scripts, so that the
// test machine's variables (HOSTNAME, MYSQLHA_*) do not leak in.
func cleanEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH") + ":/usr/sbin", "LANG=C"}, extra...)
}

// runScript runs `bash script args...` with env and returns its combined
// output and exit code (-1 when it could not run).
func runScript(t *testing.T, env []string, script string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil {
		return string(out), 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	t.Fatalf("running %s: %v", script, err)
	return "", -1
}

// writeCnf runs the StatefulSet's init container script as the pod named
// podName would (its env from the manifest, resolved with pe) and returns
// the snippet it wrote.
func writeCnf(t *testing.T, sts *appsv1.StatefulSet, podName string, pe podEnv, extraEnv ...string) string {
	t.Helper()
	init := mustContainer(t, sts.Spec.Template.Spec.InitContainers, "mysqlha-cnf")
	dir := t.TempDir()
	// A data directory of the test's own, initialised: never this machine's
	// /var/lib/mysql, where the script would record an id. (An extraEnv
	// MYSQLHA_DATADIR comes later and wins.)
	env := cleanEnv(append(resolveEnv(t, init, pe), append([]string{"HOSTNAME=" + podName, "MYSQLHA_DATADIR=" + initialisedDatadir(t)}, extraEnv...)...)...)
	out, code := runScript(t, env, filepath.Join("base", "scripts", "mysqlha-cnf.sh"), dir)
	if code != 0 {
		t.Fatalf("mysqlha-cnf.sh exited %d:\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "mysqlha.cnf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cnfSettings parses "name = value" lines (and bare option names, value
// "") of a my.cnf snippet; comments and section headers are skipped.
func cnfSettings(cnf string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(cnf, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// agentMetric is one metric family the agent registers.
type agentMetric struct {
	labels []string // constant and variable label names
	series []string // exposed series names (histograms: _bucket, _sum, _count)
}

// recordingRegisterer keeps what agent.NewMetrics registers, so that even
// the vectors that have no series yet (no fencing action taken) are known.
type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	descVarLbl = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// agentMetrics returns the agent's metric families by name, from
// agent.NewMetrics itself (not from the README), with the label names of
// each.
func agentMetrics(t *testing.T) map[string]agentMetric {
	t.Helper()
	rec := &recordingRegisterer{}
	agent.NewMetrics(rec, "c", "m")
	out := map[string]agentMetric{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		_, observer := c.(prometheus.Observer)
		_, observerVec := c.(prometheus.ObserverVec)
		for d := range ch {
			s := d.String()
			m := descName.FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("cannot read the metric name from %s", s)
			}
			var am agentMetric
			for _, kv := range strings.Split(descConst.FindStringSubmatch(s)[1], ",") {
				if name, _, ok := strings.Cut(kv, "="); ok {
					am.labels = append(am.labels, name)
				}
			}
			for _, v := range strings.Split(descVarLbl.FindStringSubmatch(s)[1], ",") {
				if v = strings.TrimSuffix(strings.TrimPrefix(v, "c("), ")"); v != "" {
					am.labels = append(am.labels, v)
				}
			}
			am.series = []string{m[1]}
			if observer || observerVec {
				am.series = append(am.series, m[1]+"_bucket", m[1]+"_sum", m[1]+"_count")
				am.labels = append(am.labels, "le")
			}
			out[m[1]] = am
		}
	}
	if len(out) < 10 {
		t.Fatalf("agent.NewMetrics registered only %d metrics: %v", len(out), out)
	}
	return out
}

// agentSeries maps every series name the agent exposes to its family.
func agentSeries(t *testing.T) map[string]agentMetric {
	t.Helper()
	out := map[string]agentMetric{}
	for _, m := range agentMetrics(t) {
		for _, s := range m.series {
			out[s] = m
		}
	}
	return out
}

func fmtList[T any](xs []T) string {
	var b strings.Builder
	for _, x := range xs {
		fmt.Fprintf(&b, "\n  %v", x)
	}
	return b.String()
}

// mountedSecretKey is the key and Secret of the file at path in container
// c of spec; "" when path is no file of a mounted Secret volume.
func mountedSecretKey(spec *corev1.PodSpec, c *corev1.Container, path string) (key, secret string) {
	for _, m := range c.VolumeMounts {
		vol := findVolume(spec, m.Name)
		rest, ok := strings.CutPrefix(path, m.MountPath+"/")
		if vol == nil || vol.Secret == nil || !ok {
			continue
		}
		for _, it := range vol.Secret.Items {
			if it.Path == rest {
				return it.Key, vol.Secret.SecretName
			}
		}
	}
	return "", ""
}

package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mysqlha/mysqlha/agent/podrole"
	"github.com/mysqlha/mysqlha/dcs"
)

// variant is one kustomization of the database cluster and what its
// manifests must say.
type variant struct {
	name                string
	dir                 string
	serverContainer     string
	serverImage         string
	agentImage          string
	flavor              string // MYSQLHA_FLAVOR
	pullNever           bool
	advertiseMySQL      string // MYSQLHA_ADVERTISE_MYSQL_ADDR as the kubelet resolves it for pod mysqlha-2
	reportHost          string // report_host in the snippet for mysqlha-2
	mysqldShutdownSlack int    // seconds of grace left for mysqld after the longest preStop wait
	pingCommand         string // the server probes' program
	serverProgram       string // what the image's entrypoint starts: mariadbd or mysqld
}

var (
	baseVariant = variant{
		name: "base", dir: ".", serverContainer: "mariadb", serverImage: "mariadb:10.11",
		agentImage: "mysqlha-agent:set-me-with-kustomize-edit-set-image", flavor: "mariadb",
		advertiseMySQL: "mysqlha-2.mysqlha.db.svc:3306", reportHost: "mysqlha-2.mysqlha.db.svc",
		mysqldShutdownSlack: 30, pingCommand: "mariadb-admin", serverProgram: "mariadbd",
	}
	localNodeVariant = variant{
		name: "local-node", dir: "overlays/local-node", serverContainer: "mariadb", serverImage: "localhost/mysqlha/mariadb:1",
		agentImage: "localhost/mysqlha/agent:1", flavor: "mariadb", pullNever: true,
		advertiseMySQL: "198.18.0.12:3306", reportHost: "198.18.0.12",
		mysqldShutdownSlack: 10, pingCommand: "mariadb-admin", serverProgram: "mariadbd",
	}
	mysql84Variant = variant{
		name: "mysql84", dir: "overlays/mysql84", serverContainer: "mysql", serverImage: "mysql:8.4",
		agentImage: "mysqlha-agent:set-me-with-kustomize-edit-set-image", flavor: "mysql",
		advertiseMySQL: "mysqlha-2.mysqlha.db.svc:3306", reportHost: "mysqlha-2.mysqlha.db.svc",
		mysqldShutdownSlack: 30, pingCommand: "mysqladmin", serverProgram: "mysqld",
	}
	variants = []variant{baseVariant, localNodeVariant, mysql84Variant}
)

// testPod are the downward-API and Secret values of pod mysqlha-2 in
// namespace db, for resolving the manifests' env.
var testPod = podEnv{
	fields: map[string]string{
		"metadata.name": "mysqlha-2", "metadata.namespace": "db", "status.podIP": "198.18.0.12", "metadata.uid": "0b5e2c1e-6f3a-4c1d-9a7e-3f2b1c0d9e8f",
		"metadata.labels['mysqlha.io/cluster']": "mysqlha",
	},
	secrets: map[string]string{
		"root-password": "root-secret", "agent-password": "agent-secret", "repl-password": "repl-secret",
		"api-token": "api-token-secret",
	},
}

func TestManifests(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			b := kustomizeBuild(t, v.dir)
			sts := only[*appsv1.StatefulSet](t, b)
			v.checkStatefulSet(t, sts)
			checkPDB(t, b, sts)
			checkServices(t, b, sts)
			checkScriptsConfigMap(t, b, sts)
			v.checkSnippet(t, sts)
		})
	}
}

func (v variant) checkStatefulSet(t *testing.T, sts *appsv1.StatefulSet) {
	t.Helper()
	spec := &sts.Spec.Template.Spec
	server := mustContainer(t, spec.Containers, v.serverContainer)
	agentC := mustContainer(t, spec.Containers, "agent")
	init := mustContainer(t, spec.InitContainers, "mysqlha-cnf")
	binaries := mustContainer(t, spec.InitContainers, "mysqlha-agent-binaries")
	if len(spec.Containers) != 2 || len(spec.InitContainers) != 2 {
		t.Errorf("want containers [%s agent] and two init containers, got %d and %d", v.serverContainer, len(spec.Containers), len(spec.InitContainers))
	}

	// Images: set through the kustomization's images field. The agent
	// runs in the server's image (its mariabackup has the server's
	// version); the agent image only provides the binaries.
	if server.Image != v.serverImage || init.Image != v.serverImage || agentC.Image != v.serverImage {
		t.Errorf("server image %q, init image %q, agent image %q; want all %q", server.Image, init.Image, agentC.Image, v.serverImage)
	}
	if binaries.Image != v.agentImage {
		t.Errorf("agent binaries image %q, want %q", binaries.Image, v.agentImage)
	}
	checkAgentBinaries(t, spec, binaries, agentC)
	for _, c := range allContainers(spec) {
		if never := c.ImagePullPolicy == corev1.PullNever; never != v.pullNever {
			t.Errorf("container %s: imagePullPolicy %q, want Never: %v", c.Name, c.ImagePullPolicy, v.pullNever)
		}
	}

	// The init container writes the snippet into the emptyDir that the
	// server reads as /etc/mysql/conf.d.
	confMount := findMount(server, "/etc/mysql/conf.d")
	if confMount == nil {
		t.Fatal("server container mounts nothing at /etc/mysql/conf.d")
	}
	if vol := findVolume(spec, confMount.Name); vol == nil || vol.EmptyDir == nil {
		t.Errorf("volume %q at /etc/mysql/conf.d is not an emptyDir: %+v", confMount.Name, vol)
	}
	if len(init.Command) != 3 || init.Command[0] != "bash" || !strings.HasSuffix(init.Command[1], "/mysqlha-cnf.sh") {
		t.Fatalf("init command %q, want bash .../mysqlha-cnf.sh DIR", init.Command)
	}
	if m := findMount(init, init.Command[2]); m == nil || m.Name != confMount.Name || m.ReadOnly {
		t.Errorf("init container writes to %s, which is not volume %q mounted writable: %+v", init.Command[2], confMount.Name, m)
	}
	checkScriptMounted(t, spec, init, init.Command[1])
	if e := findEnv(init, "MYSQLHA_FLAVOR"); e == nil || e.Value != v.flavor {
		t.Errorf("init MYSQLHA_FLAVOR %+v, want %q", e, v.flavor)
	}
	if e := findEnv(server, "MYSQLHA_FLAVOR"); e == nil || e.Value != v.flavor {
		t.Errorf("server MYSQLHA_FLAVOR %+v, want %q", e, v.flavor)
	}

	// The initdb script: alone in /docker-entrypoint-initdb.d, not
	// executable (so that the entrypoint sources it), with the passwords
	// from the Secret.
	m := findMount(server, "/docker-entrypoint-initdb.d")
	if m == nil {
		t.Fatal("nothing mounted at /docker-entrypoint-initdb.d")
	}
	vol := findVolume(spec, m.Name)
	if vol == nil || vol.ConfigMap == nil || len(vol.ConfigMap.Items) != 1 || vol.ConfigMap.Items[0].Key != "initdb-users.sh" ||
		!strings.HasSuffix(vol.ConfigMap.Items[0].Path, ".sh") {
		t.Fatalf("initdb volume %+v: want exactly the key initdb-users.sh as a .sh file", vol)
	}
	if mode := fileMode(vol.ConfigMap.DefaultMode, vol.ConfigMap.Items[0].Mode); mode&0o111 != 0 {
		t.Errorf("initdb script mode %o is executable: the entrypoint would run it without docker_process_sql", mode)
	}
	// Passwords reach the server as files of the Secret, never as
	// environment variables.
	rootEnv := map[string]string{"mariadb": "MARIADB_ROOT_PASSWORD_FILE", "mysql": "MYSQL_ROOT_PASSWORD_FILE"}
	for env, key := range map[string]string{"MYSQLHA_AGENT_PASSWORD_FILE": "agent-password", "MYSQLHA_REPL_PASSWORD_FILE": "repl-password",
		rootEnv[v.flavor]: "root-password"} {
		e := findEnv(server, env)
		var k string
		if e != nil {
			k, _ = mountedSecretKey(spec, server, e.Value)
		}
		if e == nil || e.ValueFrom != nil || k != key {
			t.Errorf("server env %s = %+v, want the path of Secret key %s, mounted", env, e, key)
		}
	}
	for flavor, name := range rootEnv {
		if e := findEnv(server, name); (e != nil) != (flavor == v.flavor) {
			t.Errorf("server env %s present: %v, want it only for %s", name, e != nil, flavor)
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("container %s env %s comes from a Secret: mount it as a file", c.Name, e.Name)
			}
		}
	}
	if m := findMount(mustContainer(t, spec.Containers, "agent"), "/etc/mysqlha/db"); m != nil {
		t.Errorf("the agent mounts the server's credentials (root's password) at %s", m.MountPath)
	}

	// Pod deletion: the server waits for the agent's hand-over (its
	// preStop hook); the agent has no hook, so it gets SIGTERM at once.
	if server.Lifecycle == nil || server.Lifecycle.PreStop == nil || server.Lifecycle.PreStop.Exec == nil {
		t.Fatal("server container has no exec preStop hook")
	}
	pre := server.Lifecycle.PreStop.Exec.Command
	if len(pre) < 2 || pre[0] != "bash" || !strings.HasSuffix(pre[1], "/prestop-wait.sh") {
		t.Fatalf("preStop %q, want bash .../prestop-wait.sh", pre)
	}
	checkScriptMounted(t, spec, server, pre[1])
	if agentC.Lifecycle != nil && agentC.Lifecycle.PreStop != nil {
		t.Error("the agent has a preStop hook: it would delay the agent's SIGTERM, and with it the hand-over")
	}
	wait := 45 // the script's default
	if e := findEnv(server, "MYSQLHA_HANDOVER_WAIT_SECONDS"); e != nil {
		n, err := strconv.Atoi(e.Value)
		if err != nil {
			t.Fatalf("MYSQLHA_HANDOVER_WAIT_SECONDS=%q", e.Value)
		}
		wait = n
	}
	// The agent's shutdown is bounded by ttl; the wait must cover that
	// (and an iteration in progress) twice over at the default timings.
	if minWait := int(2 * (dcs.DefaultTTL + dcs.DefaultLoopWait) / time.Second); wait < minWait {
		t.Errorf("hand-over wait %ds < %ds, twice the default ttl + loop_wait", wait, minWait)
	}
	grace := spec.TerminationGracePeriodSeconds
	if grace == nil || int(*grace) < wait+v.mysqldShutdownSlack {
		t.Errorf("terminationGracePeriodSeconds %v < hand-over wait %ds + %ds for mysqld to shut down", grace, wait, v.mysqldShutdownSlack)
	}

	// Probes.
	if p := agentC.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || !portIs(agentC, p.HTTPGet.Port.String(), 8008) {
		t.Errorf("agent readiness probe %+v, want GET /readyz on 8008", p)
	}
	if p := agentC.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || !portIs(agentC, p.HTTPGet.Port.String(), 8008) {
		t.Errorf("agent liveness probe %+v, want GET /healthz on 8008", p)
	}
	for what, p := range map[string]*corev1.Probe{"startup": server.StartupProbe, "liveness": server.LivenessProbe} {
		if p == nil || p.Exec == nil || len(p.Exec.Command) == 0 {
			t.Errorf("server %s probe %+v, want an exec ping", what, p)
			continue
		}
		cmd := p.Exec.Command
		if cmd[0] != v.pingCommand || cmd[len(cmd)-1] != "ping" || !slices.Contains(cmd, "--socket=/run/mysqld/mysqld.sock") {
			t.Errorf("server %s probe %q, want %s ... --socket=/run/mysqld/mysqld.sock ping", what, cmd, v.pingCommand)
		}
	}
	if p := server.StartupProbe; p != nil && int(p.PeriodSeconds*p.FailureThreshold) < 300 {
		t.Errorf("server startup probe allows %ds, want at least 300 for initialisation and crash recovery", p.PeriodSeconds*p.FailureThreshold)
	}
	if m := findMount(server, "/run/mysqld"); m == nil || findVolume(spec, m.Name) == nil || findVolume(spec, m.Name).EmptyDir == nil {
		t.Error("the socket directory /run/mysqld is not an emptyDir (writable by uid 999 whatever the image)")
	}

	// Agent: reaches its own server over loopback, advertises what peers
	// dial, reads its cluster name from the pod label.
	if !slices.Contains(agentC.Args, "--mysql-local-addr=127.0.0.1:3306") {
		t.Errorf("agent args %q lack --mysql-local-addr=127.0.0.1:3306", agentC.Args)
	}
	agentEnv := resolveEnv(t, agentC, testPod)
	if !slices.Contains(agentEnv, "MYSQLHA_ADVERTISE_MYSQL_ADDR="+v.advertiseMySQL) {
		t.Errorf("agent env %q, want MYSQLHA_ADVERTISE_MYSQL_ADDR=%s", agentEnv, v.advertiseMySQL)
	}
	if e := findEnv(agentC, "MYSQLHA_CLUSTER"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
		e.ValueFrom.FieldRef.FieldPath != "metadata.labels['mysqlha.io/cluster']" {
		t.Errorf("agent MYSQLHA_CLUSTER %+v, want the pod's mysqlha.io/cluster label", e)
	}
	if sts.Spec.Template.Labels["mysqlha.io/cluster"] == "" {
		t.Error("pod template has no mysqlha.io/cluster label")
	}
	checkAgentFlags(t, agentC)
	checkReinitMounts(t, spec, server, agentC)
	// The server starts through the wrapper that waits out a reinit swap.
	if c := server.Command; len(c) != 2 || c[0] != "bash" || !strings.HasSuffix(c[1], "/mysqld-start.sh") {
		t.Errorf("server command %q, want bash .../mysqld-start.sh", c)
	} else {
		checkScriptMounted(t, spec, server, c[1])
	}
	if want := []string{"docker-entrypoint.sh", v.serverProgram}; !slices.Equal(server.Args, want) {
		t.Errorf("server args %q, want %q", server.Args, want)
	}

	// Data: a PVC per member, in every variant (the test node's too, so
	// that its scenarios see a pod come back with its data).
	hasClaim := slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(c corev1.PersistentVolumeClaim) bool { return c.Name == "data" })
	if dataVol := findVolume(spec, "data"); !hasClaim || dataVol != nil {
		t.Errorf("want data from volumeClaimTemplates only; claim %v, volume %+v", hasClaim, dataVol)
	}
	if m := findMount(server, "/var/lib/mysql"); m == nil || m.Name != "data" || m.ReadOnly {
		t.Errorf("server data mount %+v", m)
	}

	// Scheduling: members on different nodes where possible.
	checkAntiAffinity(t, sts)

	// Resources on every container, requests within limits.
	for _, c := range allContainers(spec) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := c.Resources.Requests[r]
			lim, okLim := c.Resources.Limits[r]
			if !okReq || !okLim {
				t.Errorf("container %s: %s request set %v, limit set %v; want both", c.Name, r, okReq, okLim)
			} else if req.Cmp(lim) > 0 {
				t.Errorf("container %s: %s request %s above limit %s", c.Name, r, req.String(), lim.String())
			}
		}
	}

	// Security: numeric non-root users, and the restricted profile's rules.
	psc := spec.SecurityContext
	if psc == nil || psc.FSGroup == nil || *psc.FSGroup != 999 {
		t.Errorf("pod securityContext %+v, want fsGroup 999", psc)
	}
	// The agent shares the pod's process namespace and the server's user,
	// so that it can kill a hung server (--kill-hung-mysqld).
	if spec.ShareProcessNamespace == nil || !*spec.ShareProcessNamespace {
		t.Error("shareProcessNamespace is not true: the agent cannot see a hung server to kill it")
	}
	for name, uid := range map[string]int64{v.serverContainer: 999, "mysqlha-cnf": 999, "agent": 999, "mysqlha-agent-binaries": 999} {
		c := findContainer(allContainers(spec), name)
		if c.SecurityContext == nil || c.SecurityContext.RunAsUser == nil || *c.SecurityContext.RunAsUser != uid {
			t.Errorf("container %s: runAsUser %+v, want %d", name, c.SecurityContext, uid)
		}
	}
	if sc := agentC.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("agent: readOnlyRootFilesystem is not true")
	}
	for _, c := range allContainers(spec) {
		for _, problem := range restrictedViolations(spec, c) {
			t.Errorf("container %s breaks the restricted Pod Security profile: %s", c.Name, problem)
		}
	}
	for _, vol := range spec.Volumes {
		if vol.HostPath != nil {
			t.Errorf("volume %s is a hostPath", vol.Name)
		}
	}
	if spec.ServiceAccountName != "mysqlha-agent" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
}

// restrictedViolations checks c against the container rules of the
// restricted Pod Security Standard (the apiserver test also has the
// PodSecurity admission judge the whole pod).
func restrictedViolations(spec *corev1.PodSpec, c corev1.Container) []string {
	var out []string
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if !(ptrTrue(sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && ptrTrue(psc.RunAsNonRoot))) {
		out = append(out, "runAsNonRoot is not true")
	}
	if (sc.RunAsUser != nil && *sc.RunAsUser == 0) || (sc.RunAsUser == nil && psc.RunAsUser != nil && *psc.RunAsUser == 0) {
		out = append(out, "runAsUser 0")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		out = append(out, "allowPrivilegeEscalation is not false")
	}
	if ptrTrue(sc.Privileged) {
		out = append(out, "privileged")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		out = append(out, "capabilities do not drop ALL")
	} else if slices.ContainsFunc(sc.Capabilities.Add, func(c corev1.Capability) bool { return c != "NET_BIND_SERVICE" }) {
		out = append(out, "capabilities add more than NET_BIND_SERVICE")
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
		out = append(out, "seccomp profile is not RuntimeDefault or Localhost")
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			out = append(out, "hostPort")
		}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		out = append(out, "host namespaces")
	}
	return out
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func allContainers(spec *corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
}

func fileMode(defaultMode, itemMode *int32) int32 {
	if itemMode != nil {
		return *itemMode
	}
	if defaultMode != nil {
		return *defaultMode
	}
	return 0o644 // the API's default
}

// portIs reports whether port (a number or the name of one of c's ports)
// is want.
func portIs(c *corev1.Container, port string, want int32) bool {
	if n, err := strconv.Atoi(port); err == nil {
		return int32(n) == want
	}
	for _, p := range c.Ports {
		if p.Name == port {
			return p.ContainerPort == want
		}
	}
	return false
}

// checkScriptMounted checks that path, a script a container runs, is the
// file of a key of the scripts ConfigMap mounted in that container.
// checkAgentBinaries: the init container copies the agent into an emptyDir
// that the agent container runs it from, read only.
func checkAgentBinaries(t *testing.T, spec *corev1.PodSpec, binaries, agentC *corev1.Container) {
	t.Helper()
	if c := binaries.Command; len(c) != 2 || c[0] != "/usr/local/bin/mysqlha-copy" {
		t.Fatalf("agent binaries command %q, want /usr/local/bin/mysqlha-copy DIR", c)
	}
	into := findMount(binaries, binaries.Command[1])
	if into == nil || into.ReadOnly || findVolume(spec, into.Name) == nil || findVolume(spec, into.Name).EmptyDir == nil {
		t.Fatalf("mysqlha-copy writes to %s, which is not a writable emptyDir mount: %+v", binaries.Command[1], into)
	}
	if len(agentC.Command) != 1 || agentC.Command[0] != binaries.Command[1]+"/mysqlha-agent" {
		t.Errorf("agent command %q, want [%s/mysqlha-agent]", agentC.Command, binaries.Command[1])
	}
	if m := findMount(agentC, binaries.Command[1]); m == nil || m.Name != into.Name || !m.ReadOnly {
		t.Errorf("agent mounts %+v at %s, want volume %s read only", m, binaries.Command[1], into.Name)
	}
	if path := resolveEnv(t, agentC, testPod); !slices.ContainsFunc(path, func(e string) bool {
		return strings.HasPrefix(e, "PATH="+binaries.Command[1]+":") && strings.Contains(e, ":/usr/bin")
	}) {
		t.Errorf("agent env %q: want PATH starting with %s (kubectl exec ... agentctl) and holding /usr/bin (mariabackup)", path, binaries.Command[1])
	}
}

// checkReinitMounts: what agentctl reinit needs of the agent container (the
// README's "Needs"): the data directory, writable, at the path the server
// uses and --mysql-datadir names; the server's pid file directory; a
// writable /tmp for mariabackup.
func checkReinitMounts(t *testing.T, spec *corev1.PodSpec, server, agentC *corev1.Container) {
	t.Helper()
	if !slices.Contains(agentC.Args, "--mysql-datadir=/var/lib/mysql") {
		t.Errorf("agent args %q lack --mysql-datadir=/var/lib/mysql", agentC.Args)
	}
	if m := findMount(agentC, "/var/lib/mysql"); m == nil || m.Name != "data" || m.ReadOnly {
		t.Errorf("agent data mount %+v, want volume data writable at /var/lib/mysql", m)
	}
	run := findMount(server, "/run/mysqld")
	if m := findMount(agentC, "/run/mysqld"); m == nil || run == nil || m.Name != run.Name {
		t.Errorf("agent mounts %+v at /run/mysqld, want the server's %+v (the pid file)", m, run)
	}
	if m := findMount(agentC, "/tmp"); m == nil || m.ReadOnly || findVolume(spec, m.Name) == nil || findVolume(spec, m.Name).EmptyDir == nil {
		t.Errorf("agent /tmp mount %+v, want a writable emptyDir", m)
	}
}

func checkScriptMounted(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, path string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, m.MountPath+"/")
		if !ok {
			continue
		}
		vol := findVolume(spec, m.Name)
		if vol == nil || vol.ConfigMap == nil {
			t.Fatalf("%s: %s is not from a ConfigMap volume", c.Name, path)
		}
		if len(vol.ConfigMap.Items) == 0 {
			return
		}
		for _, it := range vol.ConfigMap.Items {
			if it.Path == rel {
				return
			}
		}
		t.Fatalf("%s: volume %s has no file %s", c.Name, m.Name, rel)
	}
	t.Fatalf("%s: nothing mounted holds %s", c.Name, path)
}

func checkAntiAffinity(t *testing.T, sts *appsv1.StatefulSet) {
	t.Helper()
	a := sts.Spec.Template.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Fatal("no preferred podAntiAffinity")
	}
	own := labels.Set(sts.Spec.Template.Labels)
	for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		sel, err := metav1.LabelSelectorAsSelector(w.PodAffinityTerm.LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		if w.PodAffinityTerm.TopologyKey == corev1.LabelHostname && sel.Matches(own) && !sel.Empty() {
			return
		}
	}
	t.Errorf("no preferred anti-affinity term on %s selecting the cluster's own pods", corev1.LabelHostname)
}

func checkPDB(t *testing.T, b *built, sts *appsv1.StatefulSet) {
	t.Helper()
	pdb := only[*policyv1.PodDisruptionBudget](t, b)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PDB maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("PDB selector %v does not select the StatefulSet's pods (%v)", pdb.Spec.Selector, err)
	}
}

func checkServices(t *testing.T, b *built, sts *appsv1.StatefulSet) {
	t.Helper()
	cluster := sts.Spec.Template.Labels["mysqlha.io/cluster"]
	got := map[string]*corev1.Service{}
	for _, o := range b.typed {
		if s, ok := o.(*corev1.Service); ok {
			got[s.Name] = s
		}
	}
	if s := got[cluster+"-replicas"]; s == nil {
		t.Errorf("no Service %s-replicas", cluster)
	} else if want := map[string]string{"mysqlha.io/cluster": cluster, "mysqlha.io/role": "replica"}; !labels.Equals(s.Spec.Selector, want) {
		t.Errorf("Service %s selects %v, want %v", s.Name, s.Spec.Selector, want)
	}
	// The primary routes this one itself (--primary-service): a selector
	// would make the EndpointSlice controller route it too.
	primary := got[cluster+"-primary"]
	if primary == nil || len(primary.Spec.Selector) != 0 || len(primary.Spec.Ports) != 1 || primary.Spec.Ports[0].Name != podrole.RoutePortName {
		t.Errorf("Service %s-primary: %+v, want no selector and one port named %s", cluster, primary, podrole.RoutePortName)
	}
	if !slices.Contains(mustContainer(t, sts.Spec.Template.Spec.Containers, "agent").Args, "--primary-service="+cluster+"-primary") {
		t.Errorf("the agent does not route Service %s-primary (--primary-service)", cluster)
	}
	h := got[sts.Spec.ServiceName]
	if h == nil || h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses ||
		!labels.SelectorFromSet(h.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("headless Service %q: %+v", sts.Spec.ServiceName, h)
	}
}

// checkScriptsConfigMap: the ConfigMap the pods mount holds the scripts of
// deploy/base/scripts/ byte for byte.
func checkScriptsConfigMap(t *testing.T, b *built, sts *appsv1.StatefulSet) {
	t.Helper()
	vol := findVolume(&sts.Spec.Template.Spec, "scripts")
	if vol == nil || vol.ConfigMap == nil {
		t.Fatal("no scripts ConfigMap volume")
	}
	var cm *corev1.ConfigMap
	for _, o := range b.typed {
		if c, ok := o.(*corev1.ConfigMap); ok && c.Name == vol.ConfigMap.Name {
			cm = c
		}
	}
	if cm == nil {
		t.Fatalf("the StatefulSet mounts ConfigMap %q, which the build does not contain: %v", vol.ConfigMap.Name, b.kinds())
	}
	for _, f := range []string{"mysqlha-cnf.sh", "initdb-users.sh", "prestop-wait.sh", "mysqld-start.sh"} {
		want, err := os.ReadFile(filepath.Join("base", "scripts", f))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[f] != string(want) {
			t.Errorf("ConfigMap %s key %s differs from base/scripts/%s", cm.Name, f, f)
		}
	}
}

// checkSnippet runs the init container's script with the env this
// variant's manifest gives it and checks the settings it writes.
func (v variant) checkSnippet(t *testing.T, sts *appsv1.StatefulSet) {
	t.Helper()
	// An initialised data directory (MySQL's snippet depends on it).
	datadir := t.TempDir()
	if err := os.Mkdir(filepath.Join(datadir, "mysql"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := cnfSettings(writeCnf(t, sts, "mysqlha-2", testPod, "MYSQLHA_DATADIR="+datadir))
	want := map[string]string{
		"server_id": "102", "report_host": v.reportHost, "log_bin": "mysql-bin", "sync_binlog": "1",
		"innodb_flush_log_at_trx_commit": "1", "binlog_expire_logs_seconds": "604800", "read_only": "ON",
		"skip_name_resolve": "ON", "bind_address": "0.0.0.0", "socket": "/run/mysqld/mysqld.sock",
	}
	absent := []string{}
	switch v.flavor {
	case "mariadb":
		want["gtid_strict_mode"] = "ON"
		want["gtid_domain_id"] = "0"
		want["log_slave_updates"] = "ON"
		want["binlog_format"] = "ROW"
		absent = []string{"gtid_mode", "enforce_gtid_consistency", "log_replica_updates", "super_read_only"}
	case "mysql":
		want["gtid_mode"] = "ON"
		want["enforce_gtid_consistency"] = "ON"
		want["log_replica_updates"] = "ON"
		want["super_read_only"] = "ON"
		absent = []string{"gtid_strict_mode", "gtid_domain_id", "log_slave_updates", "skip_slave_start"}
	}
	for k, val := range want {
		if s[k] != val {
			t.Errorf("snippet %s = %q, want %q", k, s[k], val)
		}
	}
	for _, k := range absent {
		if _, ok := s[k]; ok {
			t.Errorf("snippet sets %s, which %s does not know", k, v.flavor)
		}
	}
	if _, ok := s["innodb_buffer_pool_size"]; !ok {
		t.Error("snippet has no innodb_buffer_pool_size (MYSQLHA_EXTRA_CNF)")
	}
}

// TestSetImage is what `kustomize edit set image` does to a kustomization
// on top of deploy/: it must reach the agent, the server and the init
// container.
func TestSetImage(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// kustomize wants a relative path to a base.
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n  - " + rel + "\n" +
		"images:\n" +
		"  - name: mysqlha-agent\n    newName: registry.example.com/team/mysqlha-agent\n    newTag: v1.2.3\n" +
		"  - name: mariadb\n    newTag: 10.11.9\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	sts := only[*appsv1.StatefulSet](t, kustomizeBuild(t, dir))
	spec := &sts.Spec.Template.Spec
	if got := mustContainer(t, spec.InitContainers, "mysqlha-agent-binaries").Image; got != "registry.example.com/team/mysqlha-agent:v1.2.3" {
		t.Errorf("agent binaries image %q", got)
	}
	for _, c := range []*corev1.Container{mustContainer(t, spec.Containers, "mariadb"), mustContainer(t, spec.Containers, "agent"), mustContainer(t, spec.InitContainers, "mysqlha-cnf")} {
		if c.Image != "mariadb:10.11.9" {
			t.Errorf("%s image %q, want mariadb:10.11.9", c.Name, c.Image)
		}
	}
}

// TestLocalNodeSecret: the test overlay generates the credentials Secret
// (with a hashed name) and every volume of it follows the generated name.
func TestLocalNodeSecret(t *testing.T) {
	b := kustomizeBuild(t, localNodeVariant.dir)
	sec := only[*corev1.Secret](t, b)
	if !strings.HasPrefix(sec.Name, "mysqlha-credentials-") {
		t.Fatalf("Secret %q", sec.Name)
	}
	for _, k := range []string{"root-password", "agent-password", "repl-password", "api-token"} {
		if !strings.HasPrefix(string(sec.Data[k]), "test-only-") {
			t.Errorf("Secret key %s = %q: test passwords must say test-only", k, sec.Data[k])
		}
	}
	// The passwords are files: every Secret volume follows the generated
	// name (TestManifests refuses a Secret in an environment).
	spec := &only[*appsv1.StatefulSet](t, b).Spec.Template.Spec
	for _, name := range []string{"credentials", "db-credentials"} {
		if v := findVolume(spec, name); v == nil || v.Secret == nil || v.Secret.SecretName != sec.Name {
			t.Errorf("%s volume %+v does not mount %s", name, v, sec.Name)
		}
	}
}

// TestBaseHasNoSecret: the base must not ship credentials.
func TestBaseHasNoSecret(t *testing.T) {
	for _, dir := range []string{baseVariant.dir, mysql84Variant.dir} {
		for _, o := range kustomizeBuild(t, dir).typed {
			if s, ok := o.(*corev1.Secret); ok {
				t.Errorf("%s ships Secret %s", dir, s.Name)
			}
		}
	}
}

var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)`)

// checkAgentFlags: every flag the manifest passes is one the agent's
// --help lists (the agent refuses to start on an unknown flag).
func checkAgentFlags(t *testing.T, c *corev1.Container) {
	t.Helper()
	known := agentFlags(t)
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !known[name] {
			t.Errorf("agent arg %q is not a flag of mysqlha-agent --help", a)
		}
	}
}

var agentFlagsCache map[string]bool

// agentFlags builds cmd/agent and reads its --help.
func agentFlags(t *testing.T) map[string]bool {
	t.Helper()
	if agentFlagsCache != nil {
		return agentFlagsCache
	}
	bin := filepath.Join(t.TempDir(), "mysqlha-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/agent").CombinedOutput(); err != nil {
		t.Fatalf("building cmd/agent: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	known := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	if !known["advertise-mysql-addr"] || !known["mysql-local-addr"] {
		t.Fatalf("could not read the flags from mysqlha-agent --help:\n%s", out)
	}
	agentFlagsCache = known
	return known
}

// TestFailsafeIsTheDeploymentsDefault: every variant creates its cluster
// in failsafe mode, so that a control-plane restart is not a write outage.
func TestFailsafeIsTheDeploymentsDefault(t *testing.T) {
	for _, v := range variants {
		sts := only[*appsv1.StatefulSet](t, kustomizeBuild(t, v.dir))
		if agentC := mustContainer(t, sts.Spec.Template.Spec.Containers, "agent"); !slices.Contains(agentC.Args, "--failsafe") {
			t.Errorf("%s: agent args %v lack --failsafe", v.name, agentC.Args)
		}
	}
}

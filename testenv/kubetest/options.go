package kubetest

import (
	"fmt"
	"net"
	"strings"
)

// Option configures Start and Launch.
type Option func(*options)

type options struct {
	bindAddress        string
	advertiseAddress   string
	binDir             string
	adminUser          string
	unprivilegedUser   string
	serviceIPRange     string
	endpointReconciler bool
	saAdmission        bool
	nodeAuthorization  bool
	kubeletClientCert  bool
	tokenUsers         []tokenUser
	extraArgs          []string
}

// tokenUser is an extra line of the token file (WithTokenUser).
type tokenUser struct {
	name   string
	groups []string
	token  string
}

// WithBindAddress sets --bind-address: "0.0.0.0" to serve on every local
// address (loopback and test bridges), or one local IP. The default is
// 127.0.0.1.
func WithBindAddress(ip string) Option {
	return func(o *options) { o.bindAddress = ip }
}

// WithAdvertiseAddress sets the IP that URL, Config and WriteKubeconfig use
// and that the serving certificate is valid for (besides 127.0.0.1 and
// localhost, which it always covers). Agents in network namespaces need the
// bridge's IP here, together with WithBindAddress("0.0.0.0") or the same IP.
// The default is the bind address, or 127.0.0.1 when that is 0.0.0.0.
func WithAdvertiseAddress(ip string) Option {
	return func(o *options) { o.advertiseAddress = ip }
}

// WithBinDir runs kube-apiserver (and kube-controller-manager) from dir
// instead of BinDir().
func WithBinDir(dir string) Option {
	return func(o *options) { o.binDir = dir }
}

// WithUserNames names the admin and the unprivileged token users instead of
// AdminUser and UnprivilegedUser, so that RBAC bindings, Events and logs show
// a program's own identities (the demo's agents are "mysqlha-agent"). A name
// must not contain a comma, a quote or a line break (the token file is CSV).
func WithUserNames(admin, unprivileged string) Option {
	return func(o *options) { o.adminUser, o.unprivilegedUser = admin, unprivileged }
}

// WithServiceClusterIPRange sets --service-cluster-ip-range (default
// ServiceClusterIPRange) and adds its first address, the ClusterIP of the
// default/kubernetes Service, to the serving certificate, so that in-cluster
// clients (KUBERNETES_SERVICE_HOST) verify it. A real node sends traffic to
// this range (kube-proxy): use one in 198.18.0.0/15 there.
func WithServiceClusterIPRange(cidr string) Option {
	return func(o *options) { o.serviceIPRange = cidr }
}

// WithEndpointReconciler lets the apiserver maintain the default/kubernetes
// Endpoints and EndpointSlice with its advertise address and port, as in a
// real cluster (--endpoint-reconciler-type=lease), instead of
// --endpoint-reconciler-type=none. The advertise address must not be
// loopback: Endpoints reject it.
func WithEndpointReconciler() Option {
	return func(o *options) { o.endpointReconciler = true }
}

// WithServiceAccountAdmission keeps the ServiceAccount admission plugin on,
// so that Pods get the namespace's default ServiceAccount and a projected
// token volume. Pods are then rejected until the serviceaccount controller
// (StartControllerManager) has created that ServiceAccount.
func WithServiceAccountAdmission() Option {
	return func(o *options) { o.saAdmission = true }
}

// WithNodeAuthorization authorizes with Node,RBAC instead of RBAC alone and
// enables the NodeRestriction admission plugin, so that a kubelet can run
// as system:node:<name> in group system:nodes (see WithTokenUser) with no
// more rights than a real one.
func WithNodeAuthorization() Option {
	return func(o *options) { o.nodeAuthorization = true }
}

// WithKubeletClientCert gives the apiserver a client certificate (signed by
// the CA of ca.crt, group system:masters) for the kubelet API, and makes it
// reach kubelets at their InternalIP, so that logs, exec and port-forward
// work with a kubelet whose x509 clientCAFile is CAFile().
func WithKubeletClientCert() Option {
	return func(o *options) { o.kubeletClientCert = true }
}

// WithTokenUser adds a static token user with groups (e.g.
// "system:node:n1" in "system:nodes", or "system:kube-proxy"), whose
// configuration UserConfig and SaveUserKubeconfig return. The rules of
// WithUserNames apply to the name and to each group.
func WithTokenUser(name string, groups ...string) Option {
	return func(o *options) {
		o.tokenUsers = append(o.tokenUsers, tokenUser{name: name, groups: append([]string(nil), groups...)})
	}
}

// WithAPIServerArgs appends args to the kube-apiserver command line, e.g.
// "--allow-privileged=true". Only for flags the package does not set: a
// repeated list flag would append to the package's value, not replace it.
func WithAPIServerArgs(args ...string) Option {
	return func(o *options) { o.extraArgs = append(o.extraArgs, args...) }
}

// validateNodeOptions checks the options that a real node needs.
func (o *options) validateNodeOptions() error {
	if o.serviceIPRange == "" {
		o.serviceIPRange = ServiceClusterIPRange
	}
	if _, err := firstServiceIP(o.serviceIPRange); err != nil {
		return err
	}
	if o.endpointReconciler && net.ParseIP(o.advertiseAddress).IsLoopback() {
		return fmt.Errorf("WithEndpointReconciler needs a non-loopback advertise address, not %s", o.advertiseAddress)
	}
	seen := map[string]bool{o.adminUser: true, o.unprivilegedUser: true}
	for _, u := range o.tokenUsers {
		if !validUserName(u.name) || seen[u.name] {
			return fmt.Errorf("token user %q: want a new name without commas, quotes or line breaks", u.name)
		}
		seen[u.name] = true
		for _, g := range u.groups {
			if !validUserName(g) {
				return fmt.Errorf("token user %q: group %q: want no commas, quotes or line breaks", u.name, g)
			}
		}
	}
	return nil
}

// firstServiceIP returns the first address of a service CIDR: the ClusterIP
// the apiserver gives the default/kubernetes Service.
func firstServiceIP(cidr string) (net.IP, error) {
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service cluster IP range %q: %w", cidr, err)
	}
	ip := append(net.IP(nil), ipnet.IP...)
	for i := len(ip) - 1; i >= 0; i-- {
		if ip[i]++; ip[i] != 0 {
			break
		}
	}
	if !ipnet.Contains(ip) {
		return nil, fmt.Errorf("service cluster IP range %q has no usable address", cidr)
	}
	return ip, nil
}

// validUserName: a name that fits a field of the token file, which is CSV.
func validUserName(name string) bool {
	return name != "" && !strings.ContainsAny(name, ",\"\r\n")
}

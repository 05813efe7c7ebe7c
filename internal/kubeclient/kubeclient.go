// Package kubeclient is the agent's whole Kubernetes API surface: Leases,
// a Pod's labels and Events, the primary Service's EndpointSlice (and, for
// agentctl report, pods' state and logs). client-go's clientset registers
// every API group of Kubernetes in its scheme when the program starts, and
// those types are most of the agent's binary and of its resident memory;
// this client registers only core/v1, coordination.k8s.io/v1 and
// discovery.k8s.io/v1.
//
// Each method has the signature of client-go's typed client, so the callers'
// interfaces are satisfied by both (tests may pass a clientset).
package kubeclient

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	params = runtime.NewParameterCodec(scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err) // static registrations: fails at every start or never
		}
	}
	// List, get, watch, create, update and patch options as query parameters.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
}

// Client talks to one API server.
type Client struct {
	core, coordination, discovery rest.Interface
}

// New builds a client from cfg (which it does not modify).
func New(cfg *rest.Config) (*Client, error) {
	core, err := restFor(cfg, corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	coord, err := restFor(cfg, coordinationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	disc, err := restFor(cfg, discoveryv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &Client{core: core, coordination: coord, discovery: disc}, nil
}

func restFor(cfg *rest.Config, gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = &gv, apiPath
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
	}
	return rc, nil
}

// Leases is the Lease API of one namespace.
func (c *Client) Leases(namespace string) *Leases {
	return &Leases{c: c.coordination, ns: namespace}
}

// Pods is the Pod API of one namespace: reading a pod and patching it.
func (c *Client) Pods(namespace string) *Pods { return &Pods{c: c.core, ns: namespace} }

// Events is the Event API of one namespace: creating events.
func (c *Client) Events(namespace string) *Events { return &Events{c: c.core, ns: namespace} }

// EndpointSlices is the EndpointSlice API of one namespace.
func (c *Client) EndpointSlices(namespace string) *EndpointSlices {
	return &EndpointSlices{c: c.discovery, ns: namespace}
}

// Leases reads and writes coordination.k8s.io/v1 Leases.
type Leases struct {
	c  rest.Interface
	ns string
}

func (l *Leases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Get().Namespace(l.ns).Resource("leases").Name(name).VersionedParams(&o, params).Do(ctx).Into(out)
	return out, err
}

func (l *Leases) List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := l.c.Get().Namespace(l.ns).Resource("leases").VersionedParams(&o, params).Do(ctx).Into(out)
	return out, err
}

func (l *Leases) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return l.c.Get().Namespace(l.ns).Resource("leases").VersionedParams(&o, params).Watch(ctx)
}

func (l *Leases) Create(ctx context.Context, lease *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Post().Namespace(l.ns).Resource("leases").VersionedParams(&o, params).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l *Leases) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Put().Namespace(l.ns).Resource("leases").Name(lease.Name).VersionedParams(&o, params).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l *Leases) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	return l.c.Delete().Namespace(l.ns).Resource("leases").Name(name).Body(&o).Do(ctx).Error()
}

// Pods reads and patches core/v1 Pods.
type Pods struct {
	c  rest.Interface
	ns string
}

func (p *Pods) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.c.Get().Namespace(p.ns).Resource("pods").Name(name).VersionedParams(&o, params).Do(ctx).Into(out)
	return out, err
}

func (p *Pods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, subresources ...string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.c.Patch(pt).Namespace(p.ns).Resource("pods").Name(name).SubResource(subresources...).
		VersionedParams(&o, params).Body(data).Do(ctx).Into(out)
	return out, err
}

func (p *Pods) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.c.Get().Namespace(p.ns).Resource("pods").VersionedParams(&o, params).Do(ctx).Into(out)
	return out, err
}

// Log is the log of a container of pod, as `kubectl logs` reads it.
func (p *Pods) Log(ctx context.Context, name string, o *corev1.PodLogOptions) ([]byte, error) {
	return p.c.Get().Namespace(p.ns).Resource("pods").Name(name).SubResource("log").VersionedParams(o, params).DoRaw(ctx)
}

// Events creates and lists core/v1 Events.
type Events struct {
	c  rest.Interface
	ns string
}

func (e *Events) List(ctx context.Context, o metav1.ListOptions) (*corev1.EventList, error) {
	out := &corev1.EventList{}
	err := e.c.Get().Namespace(e.ns).Resource("events").VersionedParams(&o, params).Do(ctx).Into(out)
	return out, err
}

func (e *Events) Create(ctx context.Context, ev *corev1.Event, o metav1.CreateOptions) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.c.Post().Namespace(e.ns).Resource("events").VersionedParams(&o, params).Body(ev).Do(ctx).Into(out)
	return out, err
}

// EndpointSlices reads and writes discovery.k8s.io/v1 EndpointSlices.
type EndpointSlices struct {
	c  rest.Interface
	ns string
}

func (e *EndpointSlices) Get(ctx context.Context, name string, o metav1.GetOptions) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := e.c.Get().Namespace(e.ns).Resource("endpointslices").Name(name).VersionedParams(&o, params).Do(ctx).Into(out)
	return out, err
}

func (e *EndpointSlices) Create(ctx context.Context, s *discoveryv1.EndpointSlice, o metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := e.c.Post().Namespace(e.ns).Resource("endpointslices").VersionedParams(&o, params).Body(s).Do(ctx).Into(out)
	return out, err
}

func (e *EndpointSlices) Update(ctx context.Context, s *discoveryv1.EndpointSlice, o metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := e.c.Put().Namespace(e.ns).Resource("endpointslices").Name(s.Name).VersionedParams(&o, params).Body(s).Do(ctx).Into(out)
	return out, err
}

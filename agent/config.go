package agent

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// Config is one member's settings. Cluster-wide timings live in the DCS
// (dcs.Config); Bootstrap is what the first member stores there.
type Config struct {
	Cluster string
	// Name is this member (the pod name).
	Name string
	// MySQLAddr is host:port where replicas and peers reach this member's
	// mysqld (the pod's stable DNS name or IP).
	MySQLAddr string
	// APIURL is where peers reach this agent's HTTP API.
	APIURL string
	// ListenAddr is the HTTP API's listen address, e.g. ":8008".
	ListenAddr string
	// PeerCertRequired: requests that change what this member does (POST
	// /failsafe) need a client certificate the API verified (--api-tls-ca).
	PeerCertRequired bool

	// ReplicationUser and ReplicationPassword are what replicas use to pull;
	// ReplicationTLS, when set, makes them pull over TLS.
	ReplicationUser     string
	ReplicationPassword string
	ReplicationTLS      *mysqlctl.SourceTLS

	NoFailover       bool
	FailoverPriority int
	// PodUID is this member's pod's UID (Kubernetes), published on its
	// record (failover.TagPod): peers read that pod's containers' state
	// from the API server to see it dead before the ttl. "" outside
	// Kubernetes.
	PodUID string
	// SemiSyncTimeout is how long the primary waits for an acknowledgement
	// before falling back to asynchronous (mode "on"); mode "strict" waits
	// practically forever.
	SemiSyncTimeout time.Duration

	// Bootstrap is stored as the cluster config when none is stored yet.
	Bootstrap dcs.Config
}

// Validate checks everything that can be checked without the network, and
// names each problem with its fix.
func (c Config) Validate() error {
	var errs []error
	if err := dcs.ValidateName("cluster", c.Cluster); err != nil {
		errs = append(errs, fmt.Errorf("--cluster: %w", err))
	}
	if err := dcs.ValidateName("member", c.Name); err != nil {
		errs = append(errs, fmt.Errorf("--name (POD_NAME): %w", err))
	}
	if _, port, err := net.SplitHostPort(c.MySQLAddr); err != nil {
		errs = append(errs, fmt.Errorf("--advertise-mysql-addr %q: want host:port: %w", c.MySQLAddr, err))
	} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		errs = append(errs, fmt.Errorf("--advertise-mysql-addr %q: port must be 1-65535", c.MySQLAddr))
	}
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--advertise-api-url %q: want http(s)://host:port", c.APIURL))
	}
	if c.ReplicationUser == "" {
		errs = append(errs, errors.New("--replication-user is empty"))
	}
	if c.FailoverPriority < 0 {
		errs = append(errs, fmt.Errorf("--failover-priority %d must be >= 0", c.FailoverPriority))
	}
	if c.SemiSyncTimeout < 0 {
		errs = append(errs, fmt.Errorf("--semi-sync-timeout %s must be >= 0", c.SemiSyncTimeout))
	}
	if err := c.Bootstrap.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("timings: %w", err))
	}
	return errors.Join(errs...)
}

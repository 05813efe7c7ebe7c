// Package apitls builds the TLS configurations of the agent's HTTP API: the
// server side (its certificate, and a CA that verifies the client
// certificates peers present) and the client side a member uses to call its
// peers (the CA to verify them, and its own certificate to present).
package apitls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"

	"github.com/mysqlha/mysqlha/internal/pemfiles"
)

// Files are the PEM files of --api-tls-cert, --api-tls-key and
// --api-tls-ca, and --api-tls-server-name.
type Files struct {
	Cert, Key, CA string
	// ServerName, when set, is the name a peer's certificate must carry,
	// whatever host its API URL names: the URLs carry pod IPs, which
	// change, so one certificate for a fixed name serves every member.
	ServerName string
}

// Enabled reports whether the API serves TLS.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" }

func (f Files) check() error {
	if (f.Cert == "") != (f.Key == "") {
		return errors.New("--api-tls-cert and --api-tls-key go together: give both, or neither")
	}
	if f.CA != "" && f.Cert == "" {
		return errors.New("--api-tls-ca needs --api-tls-cert and --api-tls-key")
	}
	if f.ServerName != "" && f.CA == "" {
		return errors.New("--api-tls-server-name needs --api-tls-ca: the name is checked on certificates that CA signed")
	}
	return nil
}

// Server is the API's TLS configuration; nil without a certificate (plain
// HTTP). With a CA, client certificates are verified when given: probes and
// scrapers present none and still read, while a request that changes what a
// member does (POST /failsafe) needs one (PeerVerified).
func (f Files) Server() (*tls.Config, error) {
	cfg, pool, err := f.base()
	if cfg != nil && pool != nil {
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, err
}

// Client is the configuration for calling peers' APIs; nil without a
// certificate. It verifies peers against the CA (the system roots without
// one), by ServerName when set, and presents this member's certificate.
func (f Files) Client() (*tls.Config, error) {
	cfg, pool, err := f.base()
	if cfg != nil {
		cfg.RootCAs, cfg.ServerName = pool, f.ServerName
	}
	return cfg, err
}

// base is the configuration both sides share, with this member's
// certificate (read again when its files change), and the CA pool (nil without --api-tls-ca); a nil config
// without TLS or on error.
func (f Files) base() (*tls.Config, *x509.CertPool, error) {
	if err := f.check(); err != nil || !f.Enabled() {
		return nil, nil, err
	}
	pair, err := loadKeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, err
	}
	var pool *x509.CertPool
	if f.CA != "" {
		if pool, err = pemfiles.CAPool("--api-tls-ca", f.CA); err != nil {
			return nil, nil, err
		}
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair.get(), nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.get(), nil
		},
	}, pool, nil
}

// PeerVerified reports whether a request came over TLS with a client
// certificate the server verified.
func PeerVerified(state *tls.ConnectionState) bool {
	return state != nil && len(state.VerifiedChains) > 0
}

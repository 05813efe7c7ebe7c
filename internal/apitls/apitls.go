// Package apitls builds the TLS configurations of the agent's HTTP API: the
// server side (its certificate, and a CA that verifies the client
// certificates peers present) and the client side a member uses to call its
// peers (the CA to verify them, and its own certificate to present).
package apitls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files are the PEM files of --api-tls-cert, --api-tls-key and --api-tls-ca.
type Files struct {
	Cert, Key, CA string
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
	return nil
}

func (f Files) pair() ([]tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("--api-tls-cert %s / --api-tls-key %s: %w", f.Cert, f.Key, err)
	}
	return []tls.Certificate{cert}, nil
}

func (f Files) pool() (*x509.CertPool, error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("--api-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--api-tls-ca %s: no PEM certificate in it", f.CA)
	}
	return pool, nil
}

// Server is the API's TLS configuration; nil without a certificate (plain
// HTTP). With a CA, client certificates are verified when given: probes and
// scrapers present none and still read, while a request that changes what a
// member does (POST /failsafe) needs one (PeerVerified).
func (f Files) Server() (*tls.Config, error) {
	if err := f.check(); err != nil || !f.Enabled() {
		return nil, err
	}
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs}
	if f.CA != "" {
		if cfg.ClientCAs, err = f.pool(); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// Client is the configuration for calling peers' APIs; nil without a
// certificate. It verifies peers against the CA (the system roots without
// one) and presents this member's certificate.
func (f Files) Client() (*tls.Config, error) {
	if err := f.check(); err != nil || !f.Enabled() {
		return nil, err
	}
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs}
	if f.CA != "" {
		if cfg.RootCAs, err = f.pool(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// PeerVerified reports whether a request came over TLS with a client
// certificate the server verified.
func PeerVerified(state *tls.ConnectionState) bool {
	return state != nil && len(state.VerifiedChains) > 0
}

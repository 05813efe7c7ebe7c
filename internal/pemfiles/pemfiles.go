// Package pemfiles loads the PEM files TLS flags name, with errors that name
// the flag to fix.
package pemfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// CAPool reads the CA bundle at path, given with flag.
func CAPool(flag, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flag, path)
	}
	return pool, nil
}

// KeyPair reads a certificate and its key, given with certFlag and keyFlag.
func KeyPair(certFlag, keyFlag, cert, key string) ([]tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("%s %s / %s %s: %w", certFlag, cert, keyFlag, key, err)
	}
	return []tls.Certificate{pair}, nil
}

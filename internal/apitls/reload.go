package apitls

import (
	"crypto/tls"
	"os"
	"sync"
	"time"

	"github.com/mysqlha/mysqlha/internal/pemfiles"
)

// reloadCheck is how often, at most, a handshake looks at the files again.
var reloadCheck = time.Second

// keyPair is this member's certificate, read again when its files change:
// cert-manager renews the Secret, the kubelet swaps the mounted files, and
// the agent must present the new certificate before the old one expires,
// without a restart.
type keyPair struct {
	certFile, keyFile string

	mu          sync.Mutex
	cert        *tls.Certificate
	certMod     time.Time
	keyMod      time.Time
	lastChecked time.Time
}

// loadKeyPair reads the pair once; an error names the flags and files.
func loadKeyPair(certFile, keyFile string) (*keyPair, error) {
	k := &keyPair{certFile: certFile, keyFile: keyFile}
	certs, err := pemfiles.KeyPair("--api-tls-cert", "--api-tls-key", certFile, keyFile)
	if err != nil {
		return nil, err
	}
	k.cert = &certs[0]
	k.certMod, k.keyMod = modTime(certFile), modTime(keyFile)
	k.lastChecked = time.Now()
	return k, nil
}

// get is the current certificate. A pair that does not load (a renewal
// caught half-written) keeps the last good one until the next check.
func (k *keyPair) get() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.lastChecked) < reloadCheck {
		return k.cert
	}
	k.lastChecked = time.Now()
	certMod, keyMod := modTime(k.certFile), modTime(k.keyFile)
	if certMod.Equal(k.certMod) && keyMod.Equal(k.keyMod) {
		return k.cert
	}
	if certs, err := pemfiles.KeyPair("--api-tls-cert", "--api-tls-key", k.certFile, k.keyFile); err == nil {
		k.cert, k.certMod, k.keyMod = &certs[0], certMod, keyMod
	}
	return k.cert
}

func modTime(path string) time.Time {
	st, err := os.Stat(path) // follows the kubelet's ..data symlink
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

package connect

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/mysqlha/mysqlha/internal/pemfiles"
)

// EtcdSecurity is how a client proves itself to etcd and checks etcd: TLS
// (a CA to verify the server, a client certificate and key for client-cert
// authentication) and etcd's own users.
type EtcdSecurity struct {
	CAFile, CertFile, KeyFile string
	User, PasswordFile        string
}

// RegisterFlags adds the --etcd-cacert, --etcd-cert, --etcd-key, --etcd-user
// and --etcd-password-file flags to fs. The password is only ever read from
// a file, so that it is in no process listing, flag help or log.
func (e *EtcdSecurity) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.CAFile, "etcd-cacert", "", "CA bundle that verifies etcd's server certificate (https endpoints)")
	fs.StringVar(&e.CertFile, "etcd-cert", "", "client certificate for etcd (with --etcd-key)")
	fs.StringVar(&e.KeyFile, "etcd-key", "", "client key for etcd (with --etcd-cert)")
	fs.StringVar(&e.User, "etcd-user", "", "etcd user, when etcd authentication is on (with --etcd-password-file)")
	fs.StringVar(&e.PasswordFile, "etcd-password-file", "", "file holding the etcd user's password")
}

// tlsConfig is the client TLS configuration; nil when no TLS flag is set
// (plain http endpoints). Every problem names the flag to fix.
func (e EtcdSecurity) tlsConfig() (*tls.Config, error) {
	if e.CAFile == "" && e.CertFile == "" && e.KeyFile == "" {
		return nil, nil
	}
	if (e.CertFile == "") != (e.KeyFile == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together: give both, or neither")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	var err error
	if e.CAFile != "" {
		if cfg.RootCAs, err = pemfiles.CAPool("--etcd-cacert", e.CAFile); err != nil {
			return nil, err
		}
	}
	if e.CertFile != "" {
		if cfg.Certificates, err = pemfiles.KeyPair("--etcd-cert", "--etcd-key", e.CertFile, e.KeyFile); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// credentials reads the etcd user's password; "" and "" without a user.
func (e EtcdSecurity) credentials() (user, password string, err error) {
	switch {
	case e.User == "" && e.PasswordFile == "":
		return "", "", nil
	case e.User == "":
		return "", "", errors.New("--etcd-password-file needs --etcd-user")
	case e.PasswordFile == "":
		return "", "", errors.New("--etcd-user needs --etcd-password-file (the password is only read from a file)")
	}
	b, err := os.ReadFile(e.PasswordFile)
	if err != nil {
		return "", "", fmt.Errorf("--etcd-password-file: %w", err)
	}
	password = strings.TrimRight(string(b), "\r\n")
	if password == "" {
		return "", "", fmt.Errorf("--etcd-password-file %s is empty", e.PasswordFile)
	}
	return e.User, password, nil
}

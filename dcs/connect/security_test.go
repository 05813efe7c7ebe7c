package connect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/testenv/etcdtest"
	"github.com/mysqlha/mysqlha/testenv/testcerts"
)

// TestEtcdTLSAndAuth: against a real etcd that requires client
// certificates and has authentication on, the store works only with the CA,
// a client certificate and the user's password from a file.
func TestEtcdTLSAndAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	dir := t.TempDir()
	certs, err := testcerts.Write(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv := etcdtest.Start(t, etcdtest.WithClientTLS(certs.ServerCert, certs.ServerKey, certs.CA))
	endpoint := srv.Endpoints()[0]
	if !strings.HasPrefix(endpoint, "https://") {
		t.Fatalf("endpoint %s, want https", endpoint)
	}
	tlsFiles := EtcdSecurity{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	enableAuth(t, endpoint, tlsFiles, "s3cret-etcd")
	pwFile := filepath.Join(dir, "etcd-password")
	if err := os.WriteFile(pwFile, []byte("s3cret-etcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := tlsFiles
	good.User, good.PasswordFile = "root", pwFile

	s := Settings{Kind: "etcd", EtcdEndpoints: endpoint, Cluster: "c", Member: "db1", Etcd: good, Timeout: 5 * time.Second}
	conn, err := Open(s, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Store.AcquireLeader(ctx, 5*time.Second); err != nil {
		t.Fatalf("acquiring the lock over TLS with a user: %v", err)
	}

	wrongPw := filepath.Join(dir, "wrong")
	os.WriteFile(wrongPw, []byte("nope"), 0o600)
	for name, sec := range map[string]EtcdSecurity{
		"wrong password":     {CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, User: "root", PasswordFile: wrongPw},
		"no client cert":     {CAFile: certs.CA, User: "root", PasswordFile: pwFile},
		"no user":            tlsFiles,
		"a CA that is not":   {CAFile: certs.ClientKey, CertFile: certs.ClientCert, KeyFile: certs.ClientKey},
		"cert without a key": {CAFile: certs.CA, CertFile: certs.ClientCert},
		"user without file":  {CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, User: "root"},
		"unreadable file":    {CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, User: "root", PasswordFile: dir + "/missing"},
	} {
		bad := s
		bad.Etcd, bad.Member = sec, "db2"
		conn, err := Open(bad, zap.NewNop())
		if err == nil {
			// The lock is db1's: an AcquireLeader that gets that far has
			// read the cluster, so it got in.
			cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err = conn.Store.AcquireLeader(cctx, 5*time.Second)
			cancel()
			conn.Close()
			if err == nil || strings.Contains(err.Error(), "held by") {
				t.Errorf("%s: got into etcd (%v)", name, err)
			}
		}
		if err == nil {
			t.Errorf("%s: connected and used the store", name)
		}
		if strings.Contains(errString(err), "s3cret-etcd") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
	bad := s
	bad.EtcdEndpoints = strings.Replace(endpoint, "https://", "http://", 1)
	if _, err := Open(bad, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "use https://") {
		t.Errorf("http endpoint with TLS flags: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// enableAuth creates etcd's root user with password and turns
// authentication on.
func enableAuth(t *testing.T, endpoint string, sec EtcdSecurity, password string) {
	t.Helper()
	tlsCfg, err := sec.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
}

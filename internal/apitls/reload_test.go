package apitls

import (
	"bytes"
	"crypto/tls"
	"os"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/testcerts"
)

// A renewed certificate (cert-manager rewrote the Secret, the kubelet the
// mounted files) is presented from the next handshake on, without a
// restart; a pair caught half-written keeps the last good one.
func TestRenewedCertificateIsPresentedWithoutARestart(t *testing.T) {
	defer func(d time.Duration) { reloadCheck = d }(reloadCheck)
	reloadCheck = 0
	first, err := testcerts.Write(t.TempDir(), "mysqlha-agent")
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := testcerts.Write(t.TempDir(), "mysqlha-agent")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Files{Cert: first.ServerCert, Key: first.ServerKey}.Server()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	presented := func() []byte {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	before := presented()
	copyFile(t, renewed.ServerCert, first.ServerCert)
	copyFile(t, renewed.ServerKey, first.ServerKey)
	after := presented()
	if bytes.Equal(before, after) {
		t.Fatal("the renewed certificate is not presented: the old one still is")
	}
	if err := os.WriteFile(first.ServerCert, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := presented(); !bytes.Equal(got, after) {
		t.Fatal("a half-written certificate replaced the last good one")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

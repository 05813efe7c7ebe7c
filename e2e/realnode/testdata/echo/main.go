// Command echo is the test container of TestNodeRunsPods, an HTTP server on
// :8080:
//
//	GET /            the pod's name ($POD_NAME)
//	GET /kube        the status code of GET <own pod> from the apiserver,
//	                 in-cluster: $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
//	                 with the ServiceAccount token and CA, as an agent does
//	GET /fetch?url=U the body of GET U (a pod or a ClusterIP), or 502
//
// It exits on SIGTERM, and is static (CGO_ENABLED=0) so that the image needs
// no other file.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	name := os.Getenv("POD_NAME")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, name) })
	mux.HandleFunc("/kube", func(w http.ResponseWriter, r *http.Request) {
		code, err := getOwnPod(r.Context(), name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, code)
	})
	mux.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		body, err := get(ctx, r.URL.Query().Get("url"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, body)
	})
	srv := &http.Server{Addr: ":8080", Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// getOwnPod asks the apiserver for this pod the way client-go's
// rest.InClusterConfig does, and returns the HTTP status code.
func getOwnPod(ctx context.Context, name string) (int, error) {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return 0, err
	}
	ns, err := os.ReadFile(saDir + "/namespace")
	if err != nil {
		return 0, err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return 0, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return 0, fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	url := "https://" + host + "/api/v1/namespaces/" + strings.TrimSpace(string(ns)) + "/pods/" + name
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	// A new connection each time, so that kube-proxy balances them.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

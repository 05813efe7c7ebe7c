package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// A donor whose backup fails part-way must not hand the target a stream
// that merely ends: the target would prepare a truncated backup.
func TestFetchCloneDetectsTruncation(t *testing.T) {
	for _, tc := range []struct {
		status, wantErr string
	}{
		{status: "ok"},
		{status: "mariabackup: Error writing file", wantErr: "donor's backup failed: mariabackup: Error writing file"},
		{status: "", wantErr: "without the donor's status"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("member") != "db3" {
				http.Error(w, "wrong member", http.StatusConflict)
				return
			}
			w.Header().Set("Trailer", cloneStatusTrailer)
			lw := &lazyWriter{w: w}
			lw.Write([]byte("xbstream bytes"))
			if tc.status != "" {
				w.Header().Set(cloneStatusTrailer, tc.status)
			}
		}))
		body, err := HTTPFetchClone(srv.Client())(context.Background(), srv.URL, "db3")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(body)
		body.Close()
		srv.Close()
		if string(b) != "xbstream bytes" {
			t.Errorf("%q: body %q", tc.status, b)
		}
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("status %q: read error %v, want %q", tc.status, err, tc.wantErr)
		}
	}
}

func TestFetchCloneRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `no pending reinit request of member "db3" from this donor`, http.StatusConflict)
	}))
	defer srv.Close()
	_, err := HTTPFetchClone(srv.Client())(context.Background(), srv.URL, "db3")
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "no pending reinit request") {
		t.Fatalf("refusal: %v", err)
	}
}

// Each agent reads the DCS through its own watch: a donor may refuse a
// target that saw the request first. The target asks again; any other
// refusal ends the rebuild at once.
func TestFetchWhenTheDonorSeesTheRequest(t *testing.T) {
	ctx := context.Background()
	calls := 0
	body, err := fetchWhenSeen(ctx, clock.RealClock{}, func() (io.ReadCloser, error) {
		if calls++; calls < 3 {
			return nil, fmt.Errorf("%w: GET /clone: 409 Conflict", ErrDonorUnaware)
		}
		return io.NopCloser(strings.NewReader("stream")), nil
	})
	if err != nil || body == nil || calls != 3 {
		t.Fatalf("after two refusals: %v, %d calls", err, calls)
	}

	calls = 0
	refused := errors.New("GET /clone: 501 Not Implemented")
	if _, err := fetchWhenSeen(ctx, clock.RealClock{}, func() (io.ReadCloser, error) { calls++; return nil, refused }); err != refused || calls != 1 {
		t.Fatalf("another refusal: %v after %d calls, want it at once", err, calls)
	}

	cctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	if _, err := fetchWhenSeen(cctx, clock.RealClock{}, func() (io.ReadCloser, error) { return nil, ErrDonorUnaware }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled while the donor never sees it: %v", err)
	}
}

func TestHTTPFetchCloneConflictIsDonorUnaware(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no pending reinit request", http.StatusConflict)
	}))
	defer srv.Close()
	if _, err := HTTPFetchClone(srv.Client())(context.Background(), srv.URL, "db3"); !errors.Is(err, ErrDonorUnaware) {
		t.Fatalf("409: %v, want ErrDonorUnaware", err)
	}
}

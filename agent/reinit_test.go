package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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

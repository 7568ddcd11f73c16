package s3

import (
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// dropFirst is an HTTP transport that sends the first request matching
// match to the server and then reports a connection reset instead of its
// response: the server did the work, the client never heard of it.
type dropFirst struct {
	match   func(*http.Request) bool
	dropped atomic.Bool
}

func (d *dropFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && d.match(r) && d.dropped.CompareAndSwap(false, true) {
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	return resp, err
}

// lostClient is testClient's server with a transport that drops the
// first response matching match.
func lostClient(t *testing.T, match func(*http.Request) bool) (*Client, *dropFirst) {
	t.Helper()
	d := &dropFirst{match: match}
	c, err := New(Endpoint(os.Getenv("SLUICE_S3_ENDPOINT")), Credentials(os.Getenv("SLUICE_S3_ACCESS_KEY"), os.Getenv("SLUICE_S3_SECRET_KEY")),
		PartSize(minPartSize), HTTPClient(&http.Client{Transport: d}))
	if err != nil {
		t.Fatal(err)
	}
	return c, d
}

// TestCreateLostResponse: a multipart upload start whose response is
// lost is retried by the SDK; the upload the first attempt started is
// aborted, so none dangles once the second is completed.
func TestCreateLostResponse(t *testing.T) {
	_, bucket := testClient(t)
	c, d := lostClient(t, func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Query().Has("uploads") })
	st := c.Store(bucket)
	up, err := st.Create(t.Context(), "out/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !d.dropped.Load() {
		t.Fatal("no response was dropped")
	}
	if _, err := up.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	h, err := up.Prepare(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(t.Context(), "out/a.txt", h); err != nil {
		t.Fatal(err)
	}
	if ups := uploads(t, c, bucket); len(ups) != 0 {
		t.Fatalf("unfinished uploads left: %v", ups)
	}
	if got := listObjects(t, c, bucket, ""); string(got["out/a.txt"]) != "hello\n" {
		t.Fatalf("objects: %q", got)
	}
}

// TestLockLostResponse: a lock create and a heartbeat whose responses
// are lost (the SDK's retry is refused: the object changed) still hold
// the lock.
func TestLockLostResponse(t *testing.T) {
	_, bucket := testClient(t)
	for _, what := range []string{"If-None-Match", "If-Match"} {
		c, d := lostClient(t, func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/_lock") && r.Header.Get(what) != ""
		})
		lost := make(chan error, 1)
		st, _ := c.CheckpointStorage("s3://"+bucket+"/"+what, 0, LockTTL(time.Second), OnLockLost(func(err error) { lost <- err }))
		unlock, err := st.Lock()
		if err != nil {
			t.Fatalf("%s: Lock: %v", what, err)
		}
		for i := 0; i < 200 && !d.dropped.Load(); i++ {
			if _, err := st.Save(t.Context(), testSnapshot(int64(i+1))); err != nil {
				t.Fatalf("%s: Save: %v", what, err)
			}
		}
		if !d.dropped.Load() {
			t.Fatalf("%s: no response was dropped", what)
		}
		if _, err := st.Save(t.Context(), testSnapshot(1000)); err != nil {
			t.Fatalf("%s: Save after the lost response: %v", what, err)
		}
		select {
		case err := <-lost:
			t.Fatalf("%s: lock lost: %v", what, err)
		default:
		}
		unlock()
	}
}

package s3

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/connectors/file"
)

// TestStoreMultipart writes an object in several parts, checks that it is
// invisible until completed, completes it twice (the second time is an
// earlier attempt's completion), and aborts another upload.
func TestStoreMultipart(t *testing.T) {
	c, bucket := testClient(t)
	ctx := t.Context()
	st := c.Store(bucket)
	data := bytes.Repeat([]byte("0123456789abcdef"), (minPartSize*2+1000)/16)
	up, err := st.Create(ctx, "out/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(data); i += 100000 {
		if _, err := up.Write(data[i:min(i+100000, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	h, err := up.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := listObjects(t, c, bucket, ""); len(got) != 0 {
		t.Fatalf("objects visible before completion: %d", len(got))
	}
	if got := uploads(t, c, bucket); len(got) != 1 {
		t.Fatalf("uploads = %v, want 1", got)
	}
	for i := range 2 {
		if err := st.Complete(ctx, "out/a.txt", h); err != nil {
			t.Fatalf("complete #%d: %v", i+1, err)
		}
	}
	if got := listObjects(t, c, bucket, ""); !bytes.Equal(got["out/a.txt"], data) {
		t.Fatalf("object has %d bytes, want %d", len(got["out/a.txt"]), len(data))
	}
	up2, err := st.Create(ctx, "out/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up2.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	h2, err := up2.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := up2.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(ctx, "out/b.txt", h2); !errors.Is(err, file.ErrUploadGone) {
		t.Fatalf("complete of an aborted upload: %v, want ErrUploadGone", err)
	}
	if got := uploads(t, c, bucket); len(got) != 0 {
		t.Fatalf("uploads left: %v", got)
	}
}

// TestFSReads lists with prefixes and globs and reads with seeks and
// ReadAt.
func TestFSReads(t *testing.T) {
	c, bucket := testClient(t)
	ctx := t.Context()
	for _, k := range []string{"in/a/1.txt", "in/a/2.json", "in/b/3.txt", "in/c.txt", "other/4.txt"} {
		putObject(t, c, bucket, k, []byte("hello "+k))
	}
	fsys := c.FS()
	for _, tc := range []struct {
		pattern string
		want    int
	}{{"s3://" + bucket + "/in", 4}, {"s3://" + bucket + "/in/", 4}, {"s3://" + bucket + "/in/*/*.txt", 2},
		{"s3://" + bucket + "/in/*", 4}, {"s3://" + bucket + "/in/c.txt", 1}, {"s3://" + bucket + "/", 5}} {
		got, err := fsys.List(ctx, tc.pattern)
		if err != nil || len(got) != tc.want {
			t.Errorf("List(%s) = %v, %v; want %d files", tc.pattern, got, err, tc.want)
		}
	}
	if _, err := fsys.List(ctx, "s3://"+bucket+"/missing"); err == nil {
		t.Error("List of a missing path: no error")
	}
	f, err := fsys.Open(ctx, "s3://"+bucket+"/in/c.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(6, 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, _ := f.Read(buf)
	if string(buf[:n]) != "in/c.txt" {
		t.Errorf("read after seek = %q", buf[:n])
	}
	n, err = f.ReadAt(buf[:5], 0)
	if err != nil || string(buf[:n]) != "hello" {
		t.Errorf("ReadAt = %q, %v", buf[:n], err)
	}
}

// failParts is an HTTP transport that answers every part upload of a key
// under "fail/" with 403 AccessDenied (which the SDK does not retry)
// without sending it, and passes every other request to the server.
type failParts struct{}

func (failParts) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") && strings.Contains(r.URL.Path, "/fail/") {
		if r.Body != nil {
			r.Body.Close()
		}
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>injected</Message></Error>`
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestStorePartBuffers: uploads take their part buffers from the client's
// pool at their first write and give them back when prepared or aborted.
// Two uploads open at once, over several parts, and a third one after
// them (on a recycled buffer) store exactly their own bytes; an upload
// whose part upload failed does not recycle its buffer (the HTTP
// transport may still read a failed request's body).
func TestStorePartBuffers(t *testing.T) {
	if os.Getenv("SLUICE_S3_ENDPOINT") == "" {
		t.Skip("SLUICE_S3_ENDPOINT is not set: start an S3-compatible server with scripts/s3.sh (scripts/test.sh does)")
	}
	c, err := New(Endpoint(os.Getenv("SLUICE_S3_ENDPOINT")), Credentials(os.Getenv("SLUICE_S3_ACCESS_KEY"), os.Getenv("SLUICE_S3_SECRET_KEY")),
		PartSize(minPartSize), HTTPClient(&http.Client{Transport: failParts{}}))
	if err != nil {
		t.Fatal(err)
	}
	bucket := "t-parts-" + randSuffix()
	if err := c.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	st := c.Store(bucket)
	fill := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i%251)
		}
		return b
	}
	want := map[string][]byte{"out/a": fill(minPartSize+12345, 1), "out/b": fill(2*minPartSize+7, 2)}
	ups := map[string]file.ObjectUpload{}
	for k := range want {
		if ups[k], err = st.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for off := 0; off < 2*minPartSize+7; off += 64 << 10 {
		for k, data := range want {
			if off < len(data) {
				if _, err := ups[k].Write(data[off:min(off+64<<10, len(data))]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	complete := func(k string, up file.ObjectUpload) {
		h, err := up.Prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Complete(ctx, k, h); err != nil {
			t.Fatal(err)
		}
	}
	for k, up := range ups {
		complete(k, up)
	}
	want["out/c"] = fill(1000, 3)
	upc, err := st.Create(ctx, "out/c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upc.Write(want["out/c"]); err != nil {
		t.Fatal(err)
	}
	complete("out/c", upc)
	got := listObjects(t, c, bucket, "out/")
	for k, data := range want {
		if !bytes.Equal(got[k], data) {
			t.Errorf("%s: %d bytes stored, want its own %d bytes", k, len(got[k]), len(data))
		}
	}

	upf, err := st.Create(ctx, "fail/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upf.Write(fill(minPartSize+1, 4)); err == nil {
		t.Fatal("a part upload answered with 403: no error")
	}
	if upf.(*upload).release() {
		t.Fatal("the buffer of a failed part upload was recycled")
	}
	if err := upf.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if got := uploads(t, c, bucket); len(got) != 0 {
		t.Fatalf("uploads left: %v", got)
	}
}

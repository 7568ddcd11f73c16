package s3

import (
	"bytes"
	"errors"
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

package registry

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/s3"
)

// TestFilePartitionCommitOptions checks the partition-commit.* options'
// validation.
func TestFilePartitionCommitOptions(t *testing.T) {
	for _, c := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"path": "out", "partition-commit.policy": []string{"success-file"}}, "needs partition-by"},
		{map[string]any{"path": "out", "partition-by": []string{"c"}, "partition-commit.policy": []string{"nope"}}, `unknown policy "nope"`},
		{map[string]any{"path": "out", "partition-by": []string{"c"}, "partition-commit.policy": []string{"success-file", "success-file"}}, "twice"},
		{map[string]any{"path": "out", "partition-commit.delay": time.Hour}, "applies only with partition-commit.policy"},
		// Set to their defaults, they are settings all the same: without
		// a policy they would do nothing.
		{map[string]any{"path": "out", "partition-commit.trigger": "process-time"}, "partition-commit.trigger: applies only with partition-commit.policy"},
		{map[string]any{"path": "out", "partition-commit.time-zone": "UTC"}, "partition-commit.time-zone: applies only with partition-commit.policy"},
		{map[string]any{"path": "out", "partition-commit.policy": []string{}, "partition-commit.delay": time.Duration(0)}, "partition-commit.delay: applies only"},
		{map[string]any{"path": "out"}, ""},
		{map[string]any{"path": "out", "partition-by": []string{"c"}, "partition-commit.policy": []string{"success-file"}, "partition-commit.time-zone": "Mars/Base"}, "partition-commit.time-zone"},
		{map[string]any{"path": "out", "partition-by": []string{"c"}, "partition-commit.policy": []string{"success-file"}}, ""},
	} {
		err := validatePartitionCommit(fwWithDefaults(t, c.opts))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.opts, err, c.want)
		}
	}
}

// fwWithDefaults adds the file sink's option defaults to m, as a pipeline
// file's options get them (not IsSet).
func fwWithDefaults(t *testing.T, m map[string]any) Options {
	t.Helper()
	snk, ok := Default().Sink("file")
	if !ok {
		t.Fatal("no file sink")
	}
	return NewOptions(m).WithDefaults(snk.Options)
}

// TestFileS3PartStore reads objects back through the sink's s3 store on a
// real S3-compatible server (scripts/s3.sh).
func TestFileS3PartStore(t *testing.T) {
	ep := os.Getenv("SLUICE_S3_ENDPOINT")
	if ep == "" {
		t.Skip("SLUICE_S3_ENDPOINT is not set: start an S3-compatible server with scripts/s3.sh")
	}
	c, err := s3.New(s3.Endpoint(ep), s3.Credentials(os.Getenv("SLUICE_S3_ACCESS_KEY"), os.Getenv("SLUICE_S3_SECRET_KEY")))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	bucket := "fw-" + hex.EncodeToString(b)
	if err := c.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	st := s3PartStore{Store: c.Store(bucket), fs: c.FS(), bucket: bucket}
	if _, ok, err := st.ReadObject(t.Context(), "t/.state"); ok || err != nil {
		t.Fatalf("missing object: %v, %v", ok, err)
	}
	up, err := st.Create(t.Context(), "t/.state")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write([]byte(`{"pending":{}}`)); err != nil {
		t.Fatal(err)
	}
	h, err := up.Prepare(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(t.Context(), "t/.state", h); err != nil {
		t.Fatal(err)
	}
	got, ok, err := st.ReadObject(t.Context(), "t/.state")
	if !ok || err != nil || string(got) != `{"pending":{}}` {
		t.Fatalf("read back %q, %v, %v", got, ok, err)
	}
	if l := st.Location("t/dt=1"); l != "s3://"+bucket+"/t/dt=1" {
		t.Errorf("location %s", l)
	}
}

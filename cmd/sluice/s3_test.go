package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/parquet-go/parquet-go"
)

// s3Server returns an SDK client of the server scripts/s3.sh started, a
// new bucket, and the environment that hands the server to a pipeline
// (S3E, S3A, S3S); it skips the test without a server.
func s3Server(t *testing.T) (*awss3.Client, string, []string) {
	t.Helper()
	ep := os.Getenv("SLUICE_S3_ENDPOINT")
	if ep == "" {
		t.Skip("SLUICE_S3_ENDPOINT is not set: start an S3-compatible server with scripts/s3.sh (scripts/test.sh does)")
	}
	access, secret := os.Getenv("SLUICE_S3_ACCESS_KEY"), os.Getenv("SLUICE_S3_SECRET_KEY")
	c := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(ep), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")})
	b := make([]byte, 6)
	rand.Read(b)
	bucket := "cli-" + hex.EncodeToString(b)
	if _, err := c.CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	return c, bucket, []string{"S3E=" + ep, "S3A=" + access, "S3S=" + secret}
}

// s3Objects reads every object under prefix with the SDK: key → content.
func s3Objects(t *testing.T, c *awss3.Client, bucket, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	in := &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for range 10000 {
		page, err := c.ListObjectsV2(ctx, in)
		if err != nil {
			t.Fatalf("list s3://%s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatalf("get %s: %v", aws.ToString(o.Key), err)
			}
			b, err := io.ReadAll(g.Body)
			g.Body.Close()
			if err != nil {
				t.Fatalf("read %s: %v", aws.ToString(o.Key), err)
			}
			out[aws.ToString(o.Key)] = b
		}
		if !aws.ToBool(page.IsTruncated) {
			return out
		}
		in.ContinuationToken = page.NextContinuationToken
	}
	t.Fatal("too many pages")
	return nil
}

// s3Uploads lists the bucket's unfinished multipart uploads (every page).
func s3Uploads(t *testing.T, c *awss3.Client, bucket string) []string {
	t.Helper()
	in := &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)}
	var ups []string
	for range 1000 {
		out, err := c.ListMultipartUploads(context.Background(), in)
		if err != nil {
			t.Fatalf("list multipart uploads of %s: %v", bucket, err)
		}
		for _, u := range out.Uploads {
			ups = append(ups, aws.ToString(u.Key)+"#"+aws.ToString(u.UploadId))
		}
		if !aws.ToBool(out.IsTruncated) {
			return ups
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	t.Fatalf("list multipart uploads of %s: too many pages", bucket)
	return nil
}

// s3CountIDs counts the "id" of every JSON line of the objects.
func s3CountIDs(t *testing.T, objs map[string][]byte) map[int64]int {
	t.Helper()
	got := map[int64]int{}
	for k, b := range objs {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r struct {
				ID *int64 `json:"id"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID == nil {
				t.Fatalf("object %s: line %q: %v", k, sc.Text(), err)
			}
			got[*r.ID]++
		}
	}
	return got
}

// TestS3FileSinkKill9 runs datagen → file sink on s3:// with checkpoints
// on s3:// (credentials from AWS_* variables), kills the process with
// SIGKILL twice while it writes (leaving unfinished multipart uploads:
// listed, and required, else the recovery of uploads is not exercised),
// resumes each time with --from once the lock's TTL passed, and runs the
// last resume to the end. An independent reader (the AWS SDK) then lists
// and reads every object: every record exactly once, and no multipart
// upload left unfinished.
func TestS3FileSinkKill9(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	c, bucket, env := s3Server(t)
	work := t.TempDir()
	const count = 30000
	chk := "s3://" + bucket + "/checkpoints"
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: s3-kill9
parallelism: 2
checkpoint:
  interval: 300ms
  dir: %s
  s3.lock-ttl: 2s
restart:
  strategy: none
source:
  type: datagen
  options:
    count: %d
    splits: 3
    rate: ${RATE}
sink:
  type: file
  options:
    path: s3://%s/out
    s3.endpoint: ${S3E}
    s3.access-key: ${S3A}
    s3.secret-key: ${S3S}
`, chk, count, bucket))
	ckEnv := append([]string{"AWS_ENDPOINT_URL_S3=" + env[0][4:], "AWS_ACCESS_KEY_ID=" + env[1][4:], "AWS_SECRET_ACCESS_KEY=" + env[2][4:]}, env...)
	visible := func() int { return len(s3CountIDs(t, s3Objects(t, c, bucket, "out/"))) }
	leftAtKills := 0 // unfinished uploads found after the kills
	args := []string{"run", "--progress", "off"}
	for round := range 2 {
		p := start(t, append([]string{"RATE=3000"}, ckEnv...), append(args, file)...)
		before := visible()
		// Wait (bounded) until the run committed more records.
		for i := 0; i < 1200 && visible() < before+2000; i++ {
			time.Sleep(25 * time.Millisecond)
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		killed := time.Now()
		n := visible()
		if n <= before {
			t.Fatalf("round %d: no new records committed before kill -9 (%d visible)\n%s", round, n, p.stderr())
		}
		left := s3Uploads(t, c, bucket)
		leftAtKills += len(left)
		t.Logf("round %d: kill -9 with %d records visible, %d unfinished uploads", round, n, len(left))
		args = []string{"run", "--progress", "off", "--from", chk}
		// The killed run's lock is taken over once its heartbeat is
		// older than checkpoint.s3.lock-ttl.
		time.Sleep(time.Until(killed.Add(3500 * time.Millisecond)))
	}
	if r := run(t, ckEnv, "checkpoints", chk); r.code != 0 || !strings.Contains(r.stdout, "s3-kill9") {
		t.Errorf("sluice checkpoints %s: exit %d\n%s%s", chk, r.code, r.stdout, r.stderr)
	}
	r := run(t, append([]string{"RATE=0"}, ckEnv...), append(args, file)...)
	if r.code != 0 {
		t.Fatalf("last resume: exit %d\n%s", r.code, r.stderr)
	}
	got := s3CountIDs(t, s3Objects(t, c, bucket, "out/"))
	for i := range int64(count) {
		if got[i] != 1 {
			t.Errorf("record %d: %d times, want once", i, got[i])
		}
	}
	if len(got) != count {
		t.Errorf("%d distinct records, want %d", len(got), count)
	}
	if ups := s3Uploads(t, c, bucket); len(ups) != 0 {
		t.Errorf("unfinished multipart uploads left: %v", ups)
	}
	if leftAtKills == 0 {
		t.Error("the kills left no unfinished multipart upload: their recovery was not exercised")
	}
}

// TestS3FileSourceToLocal reads JSON lines objects from s3:// (a glob over
// two prefixes, with an object the glob leaves out) with the file source,
// through the binary, into local part files: every record once, and
// meta.path names the object.
func TestS3FileSourceToLocal(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	c, bucket, env := s3Server(t)
	work := t.TempDir()
	const perObject, objects = 2000, 4
	for o := range objects {
		var b strings.Builder
		for i := range perObject {
			fmt.Fprintf(&b, `{"id":%d}`+"\n", o*perObject+i)
		}
		key := fmt.Sprintf("in/day-%d/part-%d.jsonl", o%2, o)
		if _, err := c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: strings.NewReader(b.String())}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	if _, err := c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("in/day-0/notes.txt"),
		Body: strings.NewReader("not json\n")}); err != nil {
		t.Fatal(err)
	}
	out := work + "/out"
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: s3-read
parallelism: 2
checkpoint:
  interval: 200ms
  dir: %s/checkpoints
source:
  type: file
  options:
    paths: s3://%s/in/*/*.jsonl
    s3.endpoint: ${S3E}
    s3.access-key: ${S3A}
    s3.secret-key: ${S3S}
transforms:
  - name: with-path
    map: '{"id": id, "path": meta.path}'
sink:
  type: file
  options:
    path: %s
`, work, bucket, out))
	r := run(t, env, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	got := map[int64]int{}
	eachCommittedRecord(t, out, func(f string, rec map[string]any) {
		id, _ := rec["id"].(float64)
		got[int64(id)]++
		if p, _ := rec["path"].(string); !strings.HasPrefix(p, "s3://"+bucket+"/in/day-") {
			t.Errorf("%s: meta.path %q, want the object's s3:// URL", f, p)
		}
	})
	for i := range int64(objects * perObject) {
		if got[i] != 1 {
			t.Errorf("record %d: %d times, want once", i, got[i])
		}
	}
	if len(got) != objects*perObject {
		t.Errorf("%d distinct records, want %d", len(got), objects*perObject)
	}
}

// TestS3ExampleAndCheckpointsSettings runs
// examples/pipelines/datagen-to-s3.yaml to its end (Parquet files and
// checkpoints on s3://, endpoint and keys from the AWS_* variables): an
// independent reader (the AWS SDK and parquet-go) finds every order once
// and no unfinished multipart upload. Then `sluice checkpoints` lists its
// checkpoints: with the AWS_* variables; and, with wrong keys in the
// environment, only through --pipeline of a file whose checkpoint.s3.*
// settings carry the right ones (the environment alone is refused), never
// printing the secret key.
func TestS3ExampleAndCheckpointsSettings(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	c, bucket, env := s3Server(t)
	ep, access, secret := env[0][len("S3E="):], env[1][len("S3A="):], env[2][len("S3S="):]
	const count = 20000
	awsEnv := []string{"AWS_ENDPOINT_URL_S3=" + ep, "AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_SESSION_TOKEN="}
	r := run(t, append([]string{"BUCKET=" + bucket, "COUNT=" + strconv.Itoa(count), "RATE=0"}, awsEnv...),
		"run", "--progress", "off", pipelines+"datagen-to-s3.yaml")
	if r.code != 0 {
		t.Fatalf("datagen-to-s3.yaml: exit %d\n%s", r.code, r.stderr)
	}
	got := map[int64]int{}
	objs := s3Objects(t, c, bucket, "orders/")
	for k, b := range objs {
		rows, err := parquet.Read[struct {
			Order  int64  `parquet:"order"`
			Amount int64  `parquet:"amount"`
			User   string `parquet:"user"`
		}](bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("object %s: %v", k, err)
		}
		for _, row := range rows {
			got[row.Order]++
		}
	}
	for i := range int64(count) {
		if got[i] != 1 {
			t.Fatalf("order %d: %d times in %d objects, want once", i, got[i], len(objs))
		}
	}
	if len(got) != count {
		t.Errorf("%d distinct orders, want %d", len(got), count)
	}
	if ups := s3Uploads(t, c, bucket); len(ups) != 0 {
		t.Errorf("unfinished multipart uploads left: %v", ups)
	}
	chk := "s3://" + bucket + "/checkpoints"
	if r := run(t, awsEnv, "checkpoints", chk); r.code != 0 || !strings.Contains(r.stdout, "orders-to-s3") {
		t.Fatalf("sluice checkpoints %s with the AWS_* variables: exit %d\n%s%s", chk, r.code, r.stdout, r.stderr)
	}

	file := writeNamedPipeline(t, t.TempDir(), "settings.yaml", fmt.Sprintf(`name: list-only
checkpoint:
  dir: %s
  s3.endpoint: ${S3E}
  s3.access-key: ${S3A}
  s3.secret-key: ${S3S}
source:
  type: datagen
  options: {count: 1}
sink:
  type: print
`, chk))
	wrong := []string{"AWS_ENDPOINT_URL_S3=" + ep, "AWS_ACCESS_KEY_ID=wrong-" + access, "AWS_SECRET_ACCESS_KEY=wrong-" + secret, "AWS_SESSION_TOKEN="}
	if r := run(t, append(wrong, env...), "checkpoints", chk); r.code != 1 {
		t.Errorf("sluice checkpoints %s with wrong keys in the environment: exit %d, want 1 (refused)\n%s%s", chk, r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"checkpoints", "--pipeline", file}, {"checkpoints", "--pipeline", file, chk}} {
		for _, e := range [][]string{wrong, s3lockNoEnv} {
			r := run(t, append(slices.Clone(e), env...), args...)
			if r.code != 0 || !strings.Contains(r.stdout, "orders-to-s3") || !strings.Contains(r.stdout, "resume the newest") {
				t.Errorf("sluice %q (environment %q): exit %d\n%s%s", args, e[1], r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("sluice %q printed the secret key:\n%s%s", args, r.stdout, r.stderr)
			}
		}
	}
}

package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// s3lockNoEnv clears the AWS_* variables for a run, so that credentials
// come from the pipeline file only.
var s3lockNoEnv = []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_ENDPOINT_URL=", "AWS_ENDPOINT_URL_S3="}

// s3lockWaitKey waits (bounded) until an object under prefix whose key
// matches re exists.
func s3lockWaitKey(t *testing.T, c *awss3.Client, bucket, prefix string, re *regexp.Regexp, p *proc) {
	t.Helper()
	for range 2400 {
		out, err := c.ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			if re.MatchString(aws.ToString(o.Key)) {
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("no object %v under s3://%s/%s in 60s\n%s", re, bucket, prefix, p.stderr())
}

// s3lockPipeline is datagen → local file sink with checkpoints on
// s3://bucket/chk; the checkpoint client's settings are in the file
// (${S3E}, ${S3A}, ${S3S}), the lock's TTL is ttl.
func s3lockPipeline(t *testing.T, work, bucket, out string, count int, ttl string) string {
	return writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: s3-lock
parallelism: 2
checkpoint:
  interval: 200ms
  dir: s3://%s/chk
  s3.endpoint: ${S3E}
  s3.access-key: ${S3A}
  s3.secret-key: ${S3S}
  s3.lock-ttl: %s
restart:
  strategy: none
source:
  type: datagen
  options:
    count: %d
    splits: 2
    rate: ${RATE}
sink:
  type: file
  options:
    path: %s
`, bucket, ttl, count, out))
}

// TestS3CheckpointLock runs a job with checkpoints on s3:// and starts a
// second run on the same prefix: it is refused at start, naming the
// prefix and the holder's pid. The first is then killed with SIGKILL: a
// run right after is still refused (the lock's heartbeat is fresh), one
// after the TTL takes the lock over, resumes and finishes; the committed
// output holds every record once.
func TestS3CheckpointLock(t *testing.T) {
	c, bucket, env := s3Server(t)
	work := t.TempDir()
	out := work + "/out"
	const count = 20000
	chk := "s3://" + bucket + "/chk"
	file := s3lockPipeline(t, work, bucket, out, count, "3s")
	env = append(env, s3lockNoEnv...)
	p1 := start(t, append([]string{"RATE=2000"}, env...), "run", "--progress", "off", file)
	s3lockWaitKey(t, c, bucket, "chk/", regexp.MustCompile(`chk-\d+/_metadata$`), p1)
	pid := strconv.Itoa(p1.cmd.Process.Pid)

	r := run(t, append([]string{"RATE=2000"}, env...), "run", "--progress", "off", "--from", chk, file)
	if r.code == 0 || !strings.Contains(r.stderr, "checkpoint prefix "+chk+" is in use by another run") || !strings.Contains(r.stderr, "pid "+pid) {
		t.Fatalf("second run on the prefix: exit %d, want a refusal naming %s and pid %s\n%s", r.code, chk, pid, r.stderr)
	}
	t.Logf("second run refused: %s", strings.TrimSpace(r.stderr))

	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p1.wait(t)
	killed := time.Now()
	r = run(t, append([]string{"RATE=2000"}, env...), "run", "--progress", "off", "--from", chk, file)
	if time.Since(killed) < 2*time.Second && (r.code == 0 || !strings.Contains(r.stderr, "pid "+pid)) {
		t.Fatalf("run right after the kill: exit %d, want a refusal (fresh heartbeat)\n%s", r.code, r.stderr)
	}
	time.Sleep(time.Until(killed.Add(3*time.Second + 1500*time.Millisecond)))
	r = run(t, append([]string{"RATE=0"}, env...), "run", "--progress", "off", "--from", chk, file)
	if r.code != 0 {
		t.Fatalf("run after the TTL: exit %d, want a takeover\n%s", r.code, r.stderr)
	}
	got := map[int64]int{}
	eachCommittedRecord(t, out, func(_ string, rec map[string]any) {
		id, _ := rec["id"].(float64)
		got[int64(id)]++
	})
	for i := range int64(count) {
		if got[i] != 1 {
			t.Errorf("record %d: %d times, want once", i, got[i])
		}
	}
	if len(got) != count {
		t.Errorf("%d distinct records, want %d", len(got), count)
	}
	if objs := s3Objects(t, c, bucket, "chk/_lock"); len(objs) != 0 {
		t.Errorf("lock object left after the run ended: %v", objs)
	}
}

// TestS3CheckpointLockLost: a run whose lock object is taken over by
// another process (simulated: the object is replaced) fails the job
// instead of writing more checkpoints.
func TestS3CheckpointLockLost(t *testing.T) {
	c, bucket, env := s3Server(t)
	work := t.TempDir()
	file := s3lockPipeline(t, work, bucket, work+"/out", 10_000_000, "4s")
	env = append(env, s3lockNoEnv...)
	p := start(t, append([]string{"RATE=1000"}, env...), "run", "--progress", "off", file)
	s3lockWaitKey(t, c, bucket, "chk/", regexp.MustCompile(`chk-\d+/_metadata$`), p)
	if _, err := c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("chk/_lock"),
		Body: strings.NewReader(`{"owner":"other","host":"elsewhere","pid":4242}`)}); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	code := p.wait(t)
	if code == 0 || !strings.Contains(p.stderr(), "lost the checkpoint lock") || !strings.Contains(p.stderr(), "pid 4242") {
		t.Fatalf("run whose lock was taken over: exit %d, want a failure naming the new holder\n%s", code, p.stderr())
	}
	t.Logf("ended %s after the takeover", time.Since(taken).Round(time.Millisecond))
	// Nothing was published after the takeover.
	after := 0
	out, err := c.ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("chk/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if strings.HasSuffix(aws.ToString(o.Key), "/_metadata") && o.LastModified.After(taken.Add(time.Second)) {
			after++
		}
	}
	if after > 0 {
		t.Errorf("%d checkpoints published more than 1 s after the takeover", after)
	}
	if b := s3Objects(t, c, bucket, "chk/_lock")["chk/_lock"]; !strings.Contains(string(b), "4242") {
		t.Errorf("the taker's lock object was changed: %q", b)
	}
}

// s3credsPipeline is datagen → file sink on s3://bucket/out with
// checkpoints on s3://bucket/chk, every S3 setting and secret written in
// the file itself: the checkpoint's keys are ckKey/ckSecret, the sink's
// sinkKey/sinkSecret.
func s3credsPipeline(t *testing.T, work, bucket, endpoint string, count int, ckKey, ckSecret, sinkKey, sinkSecret string) string {
	return writeNamedPipeline(t, work, "creds.yaml", fmt.Sprintf(`name: s3-creds
checkpoint:
  interval: 200ms
  dir: s3://%[1]s/chk
  s3.endpoint: %[2]s
  s3.region: us-east-1
  s3.path-style: true
  s3.access-key: %[4]s
  s3.secret-key: %[5]s
source:
  type: datagen
  options:
    count: %[3]d
sink:
  type: file
  options:
    path: s3://%[1]s/out
    s3.endpoint: %[2]s
    s3.access-key: %[6]s
    s3.secret-key: %[7]s
`, bucket, endpoint, count, ckKey, ckSecret, sinkKey, sinkSecret))
}

// TestS3CredentialsInPipeline: with the AWS_* variables cleared, a
// pipeline whose checkpoint storage and file sink on s3:// get their
// endpoint and keys from the file runs to the end (output read back with
// the SDK); a wrong secret key, for the checkpoints or for the sink,
// fails with an error naming the bucket and the endpoint, and no output
// shows a secret.
func TestS3CredentialsInPipeline(t *testing.T) {
	c, bucket, env := s3Server(t)
	ep, key, secret := env[0][len("S3E="):], env[1][len("S3A="):], env[2][len("S3S="):]
	work := t.TempDir()
	const count = 3000
	file := s3credsPipeline(t, work, bucket, ep, count, key, secret, key, secret)
	r := run(t, s3lockNoEnv, "run", "--progress", "off", "--log-level", "debug", file)
	if r.code != 0 {
		t.Fatalf("run with the credentials in the file: exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, secret) || strings.Contains(r.stdout+r.stderr, key) {
		t.Errorf("a key appears in the output:\n%s%s", r.stdout, r.stderr)
	}
	got := s3CountIDs(t, s3Objects(t, c, bucket, "out/"))
	if len(got) != count {
		t.Errorf("%d distinct records, want %d", len(got), count)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("record %d: %d times", id, n)
		}
	}
	wrong := "WRONG" + secret[5:]
	for _, c := range []struct {
		name string
		file string
	}{
		{"checkpoints", s3credsPipeline(t, t.TempDir(), bucket, ep, count, key, wrong, key, secret)},
		{"sink", s3credsPipeline(t, t.TempDir(), bucket+"/x", ep, count, key, secret, key, wrong)},
	} {
		r := run(t, s3lockNoEnv, "run", "--progress", "off", c.file)
		msg := r.stdout + r.stderr
		if r.code == 0 || !strings.Contains(msg, "s3://"+bucket) || !strings.Contains(msg, ep) {
			t.Errorf("%s with a wrong secret key: exit %d, want an error naming s3://%s and %s\n%s", c.name, r.code, bucket, ep, msg)
		}
		if strings.Contains(msg, wrong) || strings.Contains(msg, key) {
			t.Errorf("%s with a wrong secret key: a key appears in the output:\n%s", c.name, msg)
		}
		t.Logf("%s with a wrong secret key: %s", c.name, s3lockLastLines(msg, 3))
	}
}

// s3lockLastLines returns the last n lines of s.
func s3lockLastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

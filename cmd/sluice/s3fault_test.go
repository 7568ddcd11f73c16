package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// s3faultProxy is a loopback TCP proxy in front of the S3 server that
// cuts two connections in three after a random number of bytes: half of
// them in the request direction (in the middle of an UploadPart, a PutObject of a
// checkpoint's state or _metadata, a CompleteMultipartUpload), the others
// in the response direction (after the server did the work, before the
// client heard of it). The cut is a reset (SO_LINGER 0).
type s3faultProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	rng    *rand.Rand
	cuts   atomic.Int64
	accept atomic.Int64
	// on: cutting is enabled (the final run goes without faults only if
	// the test asks).
	on atomic.Bool
}

func s3faultStart(t *testing.T, target string) *s3faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &s3faultProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, rng: rand.New(rand.NewPCG(1, 2))}
	p.on.Store(true)
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *s3faultProxy) addr() string { return "http://" + p.ln.Addr().String() }

func (p *s3faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accept.Add(1)
		p.mu.Lock()
		up := int64(-1)
		down := int64(-1)
		if p.on.Load() {
			switch p.rng.IntN(3) {
			case 0:
				up = 1<<10 + p.rng.Int64N(1<<20) // requests: 1 KiB .. 1 MiB
			case 1:
				down = 128 + p.rng.Int64N(2<<10) // responses: 128 B .. 2 KiB
			}
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, up, down) })
	}
}

// pipe forwards c to the target, cutting both after up bytes from the
// client or down bytes from the server (-1: no limit).
func (p *s3faultProxy) pipe(c net.Conn, up, down int64) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	s, err := net.Dial("tcp", strings.TrimPrefix(p.target, "http://"))
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[s] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, s)
		p.mu.Unlock()
	}()
	cut := func() {
		p.cuts.Add(1)
		for _, x := range []net.Conn{c, s} {
			if tc, ok := x.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}
	}
	var once sync.Once
	closeBoth := func() { c.Close(); s.Close() }
	copyN := func(dst, src net.Conn, limit int64) {
		defer once.Do(closeBoth)
		if limit < 0 {
			_, _ = io.Copy(dst, src)
			return
		}
		n, _ := io.CopyN(dst, src, limit)
		if n == limit {
			cut()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { copyN(s, c, up) })
	copyN(c, s, down)
	wg.Wait()
}

func (p *s3faultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// s3faultObjectBytes sums the sizes of the objects under prefix (what
// the job committed so far), read directly from the server.
func s3faultObjectBytes(t *testing.T, c *awss3.Client, bucket, prefix string) int64 {
	t.Helper()
	var n int64
	in := &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for range 1000 {
		out, err := c.ListObjectsV2(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			n += aws.ToInt64(o.Size)
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	return n
}

// TestS3Faults runs datagen → file sink on s3:// (records of ~1.5 KB, so
// multipart uploads have several parts) with checkpoints on s3://, both
// through a proxy that cuts every connection after a random number of
// bytes, and kills the process with SIGKILL twice while it writes;
// every run after a kill resumes with --from once the lock's TTL has
// passed, and runs are repeated (bounded) until one finishes. An
// independent reader (the AWS SDK, straight to the server) then finds
// every record exactly once and no unfinished multipart upload.
func TestS3Faults(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	c, bucket, env := s3Server(t)
	ep := env[0][len("S3E="):]
	proxy := s3faultStart(t, ep)
	work := t.TempDir()
	const count = 40000
	chk := "s3://" + bucket + "/chk"
	pad := strings.Repeat("x", 1500)
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: s3-faults
parallelism: 2
checkpoint:
  interval: 1s
  dir: %[1]s
  s3.endpoint: ${PROXY}
  s3.access-key: ${S3A}
  s3.secret-key: ${S3S}
  s3.lock-ttl: 3s
restart:
  strategy: fixed-delay
  attempts: 30
  delay: 200ms
source:
  type: datagen
  options:
    count: %[2]d
    splits: 4
    rate: ${RATE}
transforms:
  - map: '{"id": id, "pad": "%[4]s"}'
sink:
  type: file
  options:
    path: s3://%[3]s/out
    s3.endpoint: ${PROXY}
    s3.access-key: ${S3A}
    s3.secret-key: ${S3S}
    s3.part-size: 5242880
`, chk, count, bucket, pad))
	env = append(append(env, "PROXY="+proxy.addr()), s3lockNoEnv...)
	locked := regexp.MustCompile(`is in use by another run`)
	starting := regexp.MustCompile(`msg="job starting"`) // logged once the run holds the lock
	// resume starts a run with --from (the first without), retrying
	// (bounded) while the killed holder's lock is not yet stale. A run
	// holds the lock once it logs that its job starts (before, a run that
	// had not been refused within 2 s was taken to hold it; under load a
	// refusal came later).
	resume := func(rate string, first bool) *proc {
		args := []string{"run", "--progress", "off", "--from", chk, file}
		if first {
			args = []string{"run", "--progress", "off", file}
		}
		for range 40 {
			p := start(t, append([]string{"RATE=" + rate}, env...), args...)
			if !p.hasLine(t, starting) && locked.MatchString(p.stderr()) {
				p.wait(t)
				time.Sleep(500 * time.Millisecond)
				continue
			}
			return p
		}
		t.Fatal("the lock of the killed run was not taken over in 40 attempts")
		return nil
	}
	restarts := 0 // of the job within the runs, after a fault the SDK's retries did not absorb
	for round := range 2 {
		p := resume("2500", round == 0)
		before := s3faultObjectBytes(t, c, bucket, "out/")
		for i := 0; i < 2400 && s3faultObjectBytes(t, c, bucket, "out/") < before+12<<20; i++ {
			select {
			case <-p.done:
				t.Fatalf("round %d: the run ended early\n%s", round, p.stderr())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		restarts += strings.Count(p.stderr(), "restarting from the latest completed checkpoint")
		t.Logf("round %d: kill -9 with %d MiB committed; %d connections, %d cut so far; %d unfinished uploads",
			round, s3faultObjectBytes(t, c, bucket, "out/")>>20, proxy.accept.Load(), proxy.cuts.Load(), len(s3Uploads(t, c, bucket)))
	}
	finished := false
	for try := range 6 {
		p := resume("0", false)
		code := p.wait(t)
		restarts += strings.Count(p.stderr(), "restarting from the latest completed checkpoint")
		if code == 0 {
			finished = true
			break
		}
		t.Logf("final run %d: exit %d (faults beyond the restarts); resuming again\n%s", try, code, s3lockLastLines(p.stderr(), 2))
	}
	if !finished {
		t.Fatal("no run finished in 6 tries")
	}
	t.Logf("%d connections, %d cut; %d job restarts", proxy.accept.Load(), proxy.cuts.Load(), restarts)
	if proxy.cuts.Load() < 5 {
		t.Errorf("only %d connections were cut: the faults did not happen", proxy.cuts.Load())
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
}

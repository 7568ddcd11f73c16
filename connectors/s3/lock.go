package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/sluice-io/sluice/checkpoint"
)

// The lock of a checkpoint prefix: one object, <prefix>_lock, that names
// its holder and is renewed by it (a heartbeat). Object storage has no
// lock that dies with its holder, so a lock whose heartbeat stopped for
// the TTL counts as abandoned and may be taken over. Every write of the
// lock object is conditional, so two processes never both believe they
// hold it:
//
//   - take:      PUT If-None-Match: *       (fails if any lock exists)
//   - takeover:  PUT If-Match: <its ETag>   (of a stale lock; of two
//     takers, the second fails)
//   - heartbeat: PUT If-Match: <our ETag>   (fails once it was taken over)
//   - release:   DELETE, after a GET found it still ours
//
// Staleness is measured on the server's clock (the response's Date
// header against the object's Last-Modified), so the holders' clocks do
// not matter.

// DefaultLockTTL is how long a lock's heartbeat may be silent before
// another process may take the lock over ([LockTTL]). The holder renews
// it every TTL/4 and stops writing checkpoints when it could not renew
// it for TTL/2.
const DefaultLockTTL = 30 * time.Second

// lockName is the lock object's name under the prefix.
const lockName = "_lock"

// ErrLockLost is wrapped by the errors of a storage whose lock was taken
// over by another process or could not be renewed in time: it writes no
// more checkpoints.
var ErrLockLost = errors.New("checkpoint lock lost")

// ErrNoConditionalWrites is wrapped by Lock's error when the server does
// not honour conditional PUTs (If-None-Match, If-Match), without which
// the lock cannot exclude a second process; [NoLock] runs without it.
var ErrNoConditionalWrites = errors.New("the server does not honour conditional writes (If-None-Match / If-Match on PutObject)")

// CheckpointOption configures a [CheckpointStorage].
type CheckpointOption func(*CheckpointStorage)

// LockTTL sets the lock's TTL (default [DefaultLockTTL]; at least 1 s).
func LockTTL(d time.Duration) CheckpointOption {
	return func(s *CheckpointStorage) {
		if d > 0 {
			s.ttl = max(d, time.Second)
		}
	}
}

// OnLockLost sets a function called once, from the heartbeat goroutine,
// when the lock is lost (its error wraps [ErrLockLost]); the CLI fails
// the job with it. Saves fail from then on either way.
func OnLockLost(f func(error)) CheckpointOption {
	return func(s *CheckpointStorage) { s.onLost = f }
}

// NoLock makes Lock a no-op: for servers without conditional writes,
// where running one job per prefix is then the operator's duty.
func NoLock() CheckpointOption { return func(s *CheckpointStorage) { s.noLock = true } }

// LockHolder is what a lock object records about its holder.
type LockHolder struct {
	Owner     string    `json:"owner"` // random id of the holding storage
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"` // the holder's clock; staleness uses the server's
	TTL       string    `json:"ttl"`
}

func (h LockHolder) String() string {
	return fmt.Sprintf("owner %s, host %s, pid %d, since %s", h.Owner, h.Host, h.PID, h.Started.UTC().Format(time.RFC3339))
}

// LockedError is Lock's error when another process holds the lock.
type LockedError struct {
	URL    string        // the lock object
	Holder LockHolder    // as recorded ("" fields if unreadable)
	Age    time.Duration // since its last heartbeat, by the server's clock
	TTL    time.Duration
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("checkpoint prefix %s is in use by another run of a job (%s; last heartbeat %s ago, lock object %s); it can be taken over once its heartbeat is %s old",
		prefixOf(e.URL), e.Holder, e.Age.Round(time.Second), e.URL, e.TTL)
}

// Unwrap makes a LockedError match checkpoint.ErrLocked.
func (e *LockedError) Unwrap() error { return checkpoint.ErrLocked }

func prefixOf(lockURL string) string {
	return lockURL[:len(lockURL)-len("/"+lockName)]
}

// lockState is the lock's part of a CheckpointStorage (guarded by s.lk).
type lockState struct {
	lk      sync.Mutex
	n       int    // Lock calls not yet unlocked
	etag    string // of our last write of the lock object
	holder  LockHolder
	lostErr error
	// lostOnce: the OnLockLost function is called once per storage.
	lostOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

func (s *CheckpointStorage) lockKey() string { return s.prefix + lockName }

// Lock takes the prefix's lock object (see the package's lock notes):
// while held, Lock on any other storage of the prefix — in any process —
// fails with a *LockedError naming the holder, unless the holder's
// heartbeat is older than the TTL, when it is taken over. A goroutine
// renews the lock until the last unlock. Lock on the same storage again
// is counted. If the lock is lost, Save fails with [ErrLockLost] and the
// [OnLockLost] function is called.
func (s *CheckpointStorage) Lock() (unlock func(), err error) {
	if s.noLock {
		return func() {}, nil
	}
	s.ls.lk.Lock()
	defer s.ls.lk.Unlock()
	if s.ls.n > 0 {
		s.ls.n++
		return s.unlockOnce(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	s.ls.n, s.ls.lostErr = 1, nil
	s.ls.stop, s.ls.done = make(chan struct{}), make(chan struct{})
	go s.heartbeat(s.ls.stop, s.ls.done)
	return s.unlockOnce(), nil
}

func (s *CheckpointStorage) unlockOnce() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.ls.lk.Lock()
			s.ls.n--
			if s.ls.n > 0 {
				s.ls.lk.Unlock()
				return
			}
			stop, done := s.ls.stop, s.ls.done
			s.ls.lk.Unlock()
			close(stop)
			<-done
			s.ls.lk.Lock()
			defer s.ls.lk.Unlock()
			if s.ls.lostErr == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if h, _, _, err := s.readLock(ctx); err == nil && h.Owner == s.ls.holder.Owner {
					_ = s.del(ctx, s.lockKey())
				}
			}
			s.ls.etag = ""
		})
	}
}

// acquire takes the lock object or fails. Called with s.ls.lk held.
func (s *CheckpointStorage) acquire(ctx context.Context) error {
	host, _ := os.Hostname()
	id := make([]byte, 8)
	rand.Read(id)
	now := time.Now()
	s.ls.holder = LockHolder{Owner: hex.EncodeToString(id), Host: host, PID: os.Getpid(), Started: now, Heartbeat: now, TTL: s.ttl.String()}
	if err := s.probeConditional(ctx); err != nil {
		return err
	}
	for range 3 {
		etag, err := s.putLock(ctx, "*", "")
		if err == nil {
			s.ls.etag = etag
			return nil
		}
		if !isPrecondition(err) {
			return fmt.Errorf("lock checkpoint prefix %s: %w", s.URL(), err)
		}
		h, hetag, age, err := s.readLock(ctx)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // released meanwhile: take it
		}
		if err != nil {
			return fmt.Errorf("lock checkpoint prefix %s: %w", s.URL(), err)
		}
		if h.Owner == s.ls.holder.Owner {
			// Our PUT went through, but its response was lost and the
			// SDK's retry was refused.
			s.ls.etag = hetag
			return nil
		}
		locked := &LockedError{URL: s.url(s.lockKey()), Holder: h, Age: age, TTL: s.ttl}
		if age < s.ttl {
			return locked
		}
		// Stale: take it over, if no other taker was faster.
		etag, err = s.putLock(ctx, "", hetag)
		if err == nil {
			s.ls.etag = etag
			return nil
		}
		if isPrecondition(err) || isNotFound(err) {
			if etag, ok := s.ours(ctx); ok {
				s.ls.etag = etag // as above
				return nil
			}
			return locked
		}
		return fmt.Errorf("lock checkpoint prefix %s: take over the stale lock (%s): %w", s.URL(), h, err)
	}
	return fmt.Errorf("lock checkpoint prefix %s: the lock object kept changing: %w", s.URL(), checkpoint.ErrLocked)
}

// probeConditional checks that the server refuses a PUT If-None-Match: *
// on an existing object and a PUT If-Match with a wrong ETag, on a probe
// object of its own next to the lock.
func (s *CheckpointStorage) probeConditional(ctx context.Context) error {
	key := s.prefix + lockName + ".probe-" + s.ls.holder.Owner
	if err := s.put(ctx, key, []byte("probe\n"), false); err != nil {
		return fmt.Errorf("lock checkpoint prefix %s: %w", s.URL(), err)
	}
	defer func() { _ = s.del(context.WithoutCancel(ctx), key) }()
	for _, in := range []*s3.PutObjectInput{{IfNoneMatch: aws.String("*")}, {IfMatch: aws.String(`"00000000000000000000000000000000"`)}} {
		in.Bucket, in.Key, in.Body, in.ContentLength = aws.String(s.bucket), aws.String(key), bytes.NewReader([]byte("probe2\n")), aws.Int64(7)
		_, err := s.c.api.PutObject(ctx, in)
		if err == nil {
			return fmt.Errorf("lock checkpoint prefix %s: %s: %w; without it a second process on the prefix cannot be refused (checkpoint option s3.lock: false runs without the lock)", s.URL(), s.c.ServerName(), ErrNoConditionalWrites)
		}
		if !isPrecondition(err) {
			return fmt.Errorf("lock checkpoint prefix %s: conditional PUT of %s: %w", s.URL(), s.url(key), err)
		}
	}
	return nil
}

// putLock writes our holder record with a condition: ifNoneMatch or
// ifMatch. It returns the new ETag.
func (s *CheckpointStorage) putLock(ctx context.Context, ifNoneMatch, ifMatch string) (string, error) {
	s.ls.holder.Heartbeat = time.Now()
	b, _ := json.Marshal(s.ls.holder)
	in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.lockKey()), Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))), ContentType: aws.String("application/json")}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	}
	out, err := s.c.api.PutObject(ctx, in)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", s.url(s.lockKey()), err)
	}
	return aws.ToString(out.ETag), nil
}

// readLock reads the lock object: its holder, ETag and age (server time
// since its last write).
func (s *CheckpointStorage) readLock(ctx context.Context) (LockHolder, string, time.Duration, error) {
	var h LockHolder
	out, err := s.c.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.lockKey())})
	if err != nil {
		if isNotFound(err) {
			return h, "", 0, fmt.Errorf("read %s: %w", s.url(s.lockKey()), checkpoint.ErrNotFound)
		}
		return h, "", 0, fmt.Errorf("read %s: %w", s.url(s.lockKey()), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 1<<16))
	if err != nil {
		return h, "", 0, fmt.Errorf("read %s: %w", s.url(s.lockKey()), err)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		h = LockHolder{Owner: fmt.Sprintf("unreadable lock object (%v)", err)}
	}
	now, ok := awsmiddleware.GetServerTime(out.ResultMetadata)
	if !ok {
		now = time.Now()
	}
	var age time.Duration
	if out.LastModified != nil {
		age = now.Sub(*out.LastModified)
	} else {
		age = now.Sub(h.Heartbeat)
	}
	return h, aws.ToString(out.ETag), max(age, 0), nil
}

// heartbeat renews the lock every TTL/4 until stop is closed; it
// declares the lock lost when a renewal is refused (taken over) or none
// succeeded for TTL/2.
func (s *CheckpointStorage) heartbeat(stop, done chan struct{}) {
	defer close(done)
	every := s.ttl / 4
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), s.ttl/2)
		s.ls.lk.Lock()
		etag, err := s.putLock(ctx, "", s.ls.etag)
		var lost error
		switch {
		case err == nil:
			s.ls.etag, last = etag, start
		case isPrecondition(err) || isNotFound(err):
			if etag, ok := s.ours(ctx); ok {
				// Our renewal went through, but its response was lost
				// and the SDK's retry was refused.
				s.ls.etag, last = etag, start
				break
			}
			lost = fmt.Errorf("checkpoint prefix %s: %w: the lock object was taken over by another process (%s)", s.URL(), ErrLockLost, s.holderNow(ctx))
		case time.Since(last) > s.ttl/2:
			lost = fmt.Errorf("checkpoint prefix %s: %w: it could not be renewed for %s (another process may take it over after %s): %w", s.URL(), ErrLockLost, time.Since(last).Round(time.Second), s.ttl, err)
		}
		if lost != nil {
			s.ls.lostErr = lost
		}
		s.ls.lk.Unlock()
		cancel()
		if lost != nil {
			s.notifyLost(lost)
			<-stop
			return
		}
	}
}

// ours reports whether the lock object names this storage as its
// holder, with its ETag.
func (s *CheckpointStorage) ours(ctx context.Context) (string, bool) {
	h, etag, _, err := s.readLock(ctx)
	return etag, err == nil && h.Owner == s.ls.holder.Owner
}

// holderNow describes the lock object's holder now, for the lost-lock
// error.
func (s *CheckpointStorage) holderNow(ctx context.Context) string {
	h, _, _, err := s.readLock(ctx)
	if err != nil {
		return "lock object: " + err.Error()
	}
	return "now held by " + h.String()
}

// LockErr returns the error that made this storage lose its lock (it
// wraps [ErrLockLost]), or nil.
func (s *CheckpointStorage) LockErr() error {
	s.ls.lk.Lock()
	defer s.ls.lk.Unlock()
	return s.ls.lostErr
}

// checkLock fails if the lock is held and lost, or if the lock object
// no longer names this storage (checked with a GET before every
// publish, so a takeover stops the next checkpoint even before the
// heartbeat notices).
func (s *CheckpointStorage) checkLock(ctx context.Context) (err error) {
	var lost error
	defer func() {
		if lost != nil {
			s.notifyLost(lost)
		}
	}()
	s.ls.lk.Lock()
	defer s.ls.lk.Unlock()
	if s.ls.n == 0 {
		return nil
	}
	if s.ls.lostErr != nil {
		return s.ls.lostErr
	}
	h, _, _, err := s.readLock(ctx)
	if err == nil && h.Owner == s.ls.holder.Owner {
		return nil
	}
	if errors.Is(err, checkpoint.ErrNotFound) || err == nil {
		what := "deleted"
		if err == nil {
			what = "taken over by " + h.String()
		}
		s.ls.lostErr = fmt.Errorf("checkpoint prefix %s: %w: the lock object was %s", s.URL(), ErrLockLost, what)
		lost = s.ls.lostErr
		return lost
	}
	return fmt.Errorf("checkpoint prefix %s: check the lock: %w", s.URL(), err)
}

// notifyLost calls the OnLockLost function, once.
func (s *CheckpointStorage) notifyLost(err error) {
	s.ls.lostOnce.Do(func() {
		if s.onLost != nil {
			s.onLost(err)
		}
	})
}

// isPrecondition reports whether err is a refused conditional request.
func isPrecondition(err error) bool {
	return isCode(err, "PreconditionFailed", "ConditionalRequestConflict")
}

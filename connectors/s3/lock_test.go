package s3

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

// staleLock writes a lock object as a process killed with SIGKILL
// leaves it, and waits until it is older than ttl by the server's clock.
func staleLock(t *testing.T, c *Client, bucket, prefix string, ttl time.Duration) {
	t.Helper()
	b, _ := json.Marshal(LockHolder{Owner: "dead", Host: "gone", PID: 999999, Started: time.Now(), Heartbeat: time.Now()})
	putObject(t, c, bucket, prefix+"/_lock", b)
	time.Sleep(ttl + 1100*time.Millisecond) // Last-Modified has whole seconds
}

// TestCheckpointLock: a second storage on the prefix is refused with an
// error naming the prefix and the holder; Lock is counted; the last
// unlock deletes the lock object, and the prefix can be locked again.
func TestCheckpointLock(t *testing.T) {
	c, bucket := testClient(t)
	u := "s3://" + bucket + "/jobs/l"
	a, _ := c.CheckpointStorage(u, 0)
	b, _ := c.CheckpointStorage(u, 0)
	ua, err := a.Lock()
	if err != nil {
		t.Fatal(err)
	}
	ua2, err := a.Lock()
	if err != nil {
		t.Fatalf("second Lock of the same storage: %v", err)
	}
	_, err = b.Lock()
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("Lock of a second storage: %v, want a LockedError", err)
	}
	for _, want := range []string{u, "pid " + strconv.Itoa(os.Getpid()), u + "/_lock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	ua()
	ua() // a second call of one unlock is a no-op
	if _, err := b.Lock(); err == nil {
		t.Fatal("Lock while one of two Locks is held: no error")
	}
	ua2()
	if objs := listObjects(t, c, bucket, "jobs/l/"); len(objs) != 0 {
		t.Fatalf("objects left after unlock: %v", objs)
	}
	ub, err := b.Lock()
	if err != nil {
		t.Fatalf("Lock after the holder unlocked: %v", err)
	}
	if _, err := b.Save(t.Context(), testSnapshot(1)); err != nil {
		t.Fatalf("Save while holding the lock: %v", err)
	}
	ub()
}

// TestCheckpointLockTakeover: a lock whose heartbeat stopped for the TTL
// (its holder was killed) is taken over; of two concurrent takers only
// one wins; a live holder's heartbeat keeps the lock past the TTL.
func TestCheckpointLockTakeover(t *testing.T) {
	c, bucket := testClient(t)
	const ttl = 2 * time.Second
	u := "s3://" + bucket + "/jobs/t"
	staleLock(t, c, bucket, "jobs/t", ttl)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []func()
	var errs []error
	for range 3 {
		wg.Go(func() {
			st, _ := c.CheckpointStorage(u, 0, LockTTL(ttl))
			unlock, err := st.Lock()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				won = append(won, unlock)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d of 3 takers of a stale lock won (errors: %v)", len(won), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, checkpoint.ErrLocked) {
			t.Errorf("a losing taker's error: %v, want ErrLocked", err)
		}
	}
	// The winner's heartbeat keeps it fresh past the TTL.
	time.Sleep(ttl + 1100*time.Millisecond)
	other, _ := c.CheckpointStorage(u, 0, LockTTL(ttl))
	if _, err := other.Lock(); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("Lock of a heartbeating lock after its TTL: %v, want ErrLocked", err)
	}
	won[0]()
}

// TestCheckpointLockLost: a holder whose lock was taken over (it hung
// past the TTL) saves no more checkpoints, and its OnLockLost function
// is called.
func TestCheckpointLockLost(t *testing.T) {
	c, bucket := testClient(t)
	const ttl = 2 * time.Second
	u := "s3://" + bucket + "/jobs/x"
	lost := make(chan error, 1)
	a, _ := c.CheckpointStorage(u, 0, LockTTL(ttl), OnLockLost(func(err error) { lost <- err }))
	unlock, err := a.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := a.Save(t.Context(), testSnapshot(1)); err != nil {
		t.Fatal(err)
	}
	// Another process takes the lock over (as after a hang of a past
	// the TTL): its record replaces a's.
	b, _ := json.Marshal(LockHolder{Owner: "taker", Host: "h2", PID: 4242, Started: time.Now(), Heartbeat: time.Now()})
	putObject(t, c, bucket, "jobs/x/_lock", b)
	_, err = a.Save(t.Context(), testSnapshot(2))
	if !errors.Is(err, ErrLockLost) || !strings.Contains(err.Error(), "pid 4242") {
		t.Fatalf("Save after a takeover: %v, want ErrLockLost naming the new holder", err)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, ErrLockLost) {
			t.Fatalf("OnLockLost got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnLockLost was not called")
	}
	if _, _, err := a.Get(t.Context(), checkpoint.Checkpoint, 2); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("checkpoint 2 after the lost lock: %v, want none", err)
	}
	if a.LockErr() == nil {
		t.Fatal("LockErr is nil after the loss")
	}
}

// TestCheckpointLockHeartbeatLost: the heartbeat notices a takeover by
// itself, without a Save.
func TestCheckpointLockHeartbeatLost(t *testing.T) {
	c, bucket := testClient(t)
	const ttl = 2 * time.Second
	lost := make(chan error, 1)
	a, _ := c.CheckpointStorage("s3://"+bucket+"/jobs/h", 0, LockTTL(ttl), OnLockLost(func(err error) { lost <- err }))
	unlock, err := a.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	putObject(t, c, bucket, "jobs/h/_lock", []byte(`{"owner":"taker","pid":77}`))
	select {
	case err := <-lost:
		if !errors.Is(err, ErrLockLost) || !strings.Contains(err.Error(), "pid 77") {
			t.Fatalf("OnLockLost got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat did not notice the takeover")
	}
}

// TestAuthErrorNamesServer: a request refused for its credentials fails
// with an error naming the endpoint and the object, never the keys.
func TestAuthErrorNamesServer(t *testing.T) {
	_, bucket := testClient(t)
	ep := os.Getenv("SLUICE_S3_ENDPOINT")
	bad, err := New(Endpoint(ep), Credentials(os.Getenv("SLUICE_S3_ACCESS_KEY"), "wrong-secret-key-value"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := bad.CheckpointStorage("s3://"+bucket+"/p", 0)
	_, err = st.Lock()
	if err == nil {
		t.Fatal("Lock with a wrong secret key: no error")
	}
	msg := err.Error()
	for _, want := range []string{"endpoint " + ep + " refused the credentials", "s3://" + bucket + "/p"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "wrong-secret-key-value") || strings.Contains(msg, os.Getenv("SLUICE_S3_ACCESS_KEY")) {
		t.Errorf("error %q shows a key", msg)
	}
}

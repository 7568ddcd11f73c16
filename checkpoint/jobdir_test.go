package checkpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLatestRefusesDeletedNewest: a deleted _metadata (or a deleted
// directory) of the newest completed checkpoint is indistinguishable from
// an incomplete checkpoint by listing alone; the _latest record tells them
// apart, and Latest refuses rather than fall back to checkpoint 2.
func TestLatestRefusesDeletedNewest(t *testing.T) {
	for _, c := range []struct {
		name, want string
		damage     func(dir string) error
	}{
		{"deleted _metadata", "its _metadata is missing", func(dir string) error { return os.Remove(filepath.Join(dir, metadataFileName)) }},
		{"deleted directory", "its directory is missing", os.RemoveAll},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			l := saved(t)
			chk3 := filepath.Join(l.Dir(), "chk-3")
			if err := c.damage(chk3); err != nil {
				t.Fatal(err)
			}
			s, _, err := l.Latest(ctx)
			if err == nil {
				t.Fatalf("Latest: got checkpoint %d, want a refusal naming checkpoint 3", s.ID)
			}
			if !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), chk3) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Latest: got %v, want ErrDamaged and ErrNotFound naming %s and saying %q", err, chk3, c.want)
			}
			if _, _, err := LoadLatest(ctx, l.Dir()); !errors.Is(err, ErrDamaged) {
				t.Errorf("LoadLatest: got %v, want ErrDamaged", err)
			}
			if id, ok, damaged, err := Newest(ctx, l.Dir()); err != nil || !ok || id != 3 || damaged == nil {
				t.Errorf("Newest: got %d, %t, %v, %v; want 3, damaged", id, ok, damaged, err)
			}
			// The older checkpoint stays loadable on explicit request.
			if s, _, err := l.Get(ctx, Checkpoint, 2); err != nil || s.ID != 2 {
				t.Errorf("Get(2): %v", err)
			}
		})
	}
}

// TestLatestRecord: _latest follows each completed checkpoint, a Save
// keeps the damaged recorded checkpoint's directory (evidence, not
// garbage), and discarding the latest checkpoint on purpose moves the
// record to the next older one.
func TestLatestRecord(t *testing.T) {
	ctx := context.Background()
	l := saved(t)
	if id, ok, err := LatestCompleted(l.Dir()); err != nil || !ok || id != 3 {
		t.Fatalf("LatestCompleted: got %d, %t, %v; want 3", id, ok, err)
	}
	mustSave(t, l, snap(4, Savepoint))
	if id, _, _ := LatestCompleted(l.Dir()); id != 3 {
		t.Errorf("a savepoint moved the record to %d", id)
	}
	if err := os.Remove(filepath.Join(l.Dir(), "chk-3", metadataFileName)); err != nil {
		t.Fatal(err)
	}
	if err := l.collectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), "chk-3")); err != nil {
		t.Errorf("garbage collection removed the damaged latest checkpoint: %v", err)
	}
	if err := l.Discard(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := LatestCompleted(l.Dir()); err != nil || !ok || id != 2 {
		t.Errorf("after discarding 3: LatestCompleted %d, %t, %v; want 2", id, ok, err)
	}
	if s, _, err := l.Latest(ctx); err != nil || s.ID != 2 {
		t.Errorf("after discarding 3: Latest %v, want 2", err)
	}
}

func TestJobIDFile(t *testing.T) {
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if id, err := l.JobID(); err != nil || id != "" {
		t.Fatalf("JobID of a new dir: %q, %v", id, err)
	}
	if err := l.SetJobID("00000000000000aa"); err != nil {
		t.Fatal(err)
	}
	if err := l.SetJobID("00000000000000aa"); err != nil {
		t.Errorf("same id again: %v", err)
	}
	if id, err := ReadJobID(l.Dir()); err != nil || id != "00000000000000aa" {
		t.Errorf("ReadJobID: %q, %v", id, err)
	}
	err = l.SetJobID("00000000000000bb")
	if !errors.Is(err, ErrOtherJob) || !strings.Contains(err.Error(), "00000000000000aa") || !strings.Contains(err.Error(), "00000000000000bb") {
		t.Errorf("another id: got %v, want ErrOtherJob naming both", err)
	}
	if got := dirEntriesAll(t, l.Dir()); strings.Join(got, ",") != "_job" {
		t.Errorf("directory holds %v, want only _job", got)
	}
}

func dirEntriesAll(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestLockInProcess: a second Local on a locked directory fails at once,
// naming the directory and this process's pid; the same Local locks again
// (counted); after the last unlock the other Local gets the lock.
func TestLockInProcess(t *testing.T) {
	dir := t.TempDir()
	a, _ := NewLocal(dir)
	b, _ := NewLocal(dir)
	unlockA, err := a.Lock()
	if err != nil {
		t.Fatal(err)
	}
	unlockA2, err := a.Lock()
	if err != nil {
		t.Fatalf("the same Local again: %v", err)
	}
	_, err = b.Lock()
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), a.Dir()) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second Local: got %v, want ErrLocked naming %s and pid %d", err, a.Dir(), os.Getpid())
	}
	unlockA()
	unlockA() // idempotent
	if _, err := b.Lock(); !errors.Is(err, ErrLocked) {
		t.Fatalf("after one of two unlocks: got %v, want still locked", err)
	}
	unlockA2()
	unlockB, err := b.Lock()
	if err != nil {
		t.Fatalf("after the holder unlocked: %v", err)
	}
	unlockB()
}

// TestLockKilledHolder: a process holding the lock blocks other
// processes (the error names its pid); after kill -9 the kernel releases
// the lock and the next Lock succeeds — no stale lock.
func TestLockKilledHolder(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_LOCK_HOLDER="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	locked := false
	for sc.Scan() {
		if sc.Text() == "locked" {
			locked = true
			break
		}
	}
	if !locked {
		t.Fatal("the holder process did not report its lock")
	}
	l, _ := NewLocal(dir)
	_, err = l.Lock()
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Fatalf("while another process holds it: got %v, want ErrLocked naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	unlock, err := l.Lock()
	if err != nil {
		t.Fatalf("after kill -9 of the holder: %v", err)
	}
	unlock()
}

// TestLockHolderProcess is the body of the holder process of
// TestLockKilledHolder; on its own it does nothing.
func TestLockHolderProcess(t *testing.T) {
	dir := os.Getenv("SLUICE_LOCK_HOLDER")
	if dir == "" {
		t.Skip("helper process of TestLockKilledHolder")
	}
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	// Block until killed; stdin is /dev/null under exec, so wait on a
	// pipe nobody writes to.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, _ = r.Read(make([]byte, 1))
}

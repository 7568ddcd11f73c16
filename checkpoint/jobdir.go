package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Files a Local keeps in its directory besides the snapshot directories.
const (
	// jobFileName records the id of the job that owns the directory.
	jobFileName = "_job"
	// lockFileName is flocked by the process that runs the job; it holds
	// that process's pid.
	lockFileName = "_lock"
	// latestFileName records the newest completed checkpoint ("chk-<id>"),
	// replaced atomically after each completed checkpoint.
	latestFileName = "_latest"
)

var (
	// ErrLocked is wrapped by Lock's error when another process (or another
	// Local in this process) holds the directory's lock.
	ErrLocked = errors.New("checkpoint directory is in use")
	// ErrOtherJob is wrapped by SetJobID's error when the directory belongs
	// to a job with another id.
	ErrOtherJob = errors.New("checkpoint directory belongs to another job")
	// ErrDamaged is wrapped (together with ErrCorrupt or ErrNotFound) by
	// Latest's error when the newest completed checkpoint cannot be loaded.
	ErrDamaged = errors.New("newest completed checkpoint is damaged")
)

// validJobID reports whether id is 1 to 128 of the characters
// [0-9A-Za-z._-]. (A loop, not a regexp: the regexp's {1,128} compiled at
// package initialisation took about a millisecond and 1,700 allocations
// of every process's start-up.)
func validJobID(id string) bool {
	if len(id) < 1 || len(id) > 128 {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case '0' <= c && c <= '9', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// JobID returns the job id recorded in the directory by SetJobID, or ""
// if none is recorded.
func (l *Local) JobID() (string, error) { return ReadJobID(l.dir) }

// ReadJobID returns the job id recorded in checkpoint directory dir (see
// Local.SetJobID), or "" if none is recorded.
func ReadJobID(dir string) (string, error) {
	path := filepath.Join(dir, jobFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read job id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !validJobID(id) {
		return "", fmt.Errorf("read job id: %s: %w", path, corruptf("invalid job id %q", id))
	}
	return id, nil
}

// SetJobID records id as the id of the job that owns the directory, in
// <dir>/_job (written atomically and fsynced). A job that starts again on
// the same directory (for instance after a kill -9 before its first
// checkpoint) reads it back with JobID and keeps its id, so its sinks find
// what the earlier attempt left behind. If the directory already records
// another id, SetJobID fails with an error wrapping ErrOtherJob that names
// both; recording the same id again does nothing.
func (l *Local) SetJobID(id string) error {
	if !validJobID(id) {
		return fmt.Errorf("checkpoint storage %s: record job id: invalid id %q", l.dir, id)
	}
	old, err := l.JobID()
	if err != nil {
		return fmt.Errorf("checkpoint storage %s: %w", l.dir, err)
	}
	switch old {
	case id:
		return nil
	case "":
	default:
		return fmt.Errorf("checkpoint storage %s belongs to job id %s, not to this job (id %s): %w; use another checkpoint directory, or resume that job",
			l.dir, old, id, ErrOtherJob)
	}
	if err := replaceFile(l.fs, filepath.Join(l.dir, jobFileName), []byte(id+"\n")); err != nil {
		return fmt.Errorf("checkpoint storage %s: record job id: %w", l.dir, err)
	}
	return nil
}

// replaceFile writes b to path atomically: a temp file, fsynced, renamed
// over path, and the directory fsynced.
func replaceFile(fsys fileSystem, path string, b []byte) error {
	tmp := path + ".tmp"
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeFile(fsys, tmp, b); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// Lock takes an exclusive lock on the directory (an OS file lock on
// <dir>/_lock, so the kernel releases it when the process dies, even by
// kill -9) and writes this process's pid into the lock file. While it is
// held, Lock on any other Local of the same directory — in this process or
// another — fails at once with an error wrapping ErrLocked that names the
// directory and the holder's pid. Lock on the same Local again is counted:
// the lock is released when every returned unlock has been called.
//
// The runtime takes the lock for the whole run of a job whose storage is a
// Local, so two processes never run one job on one directory.
func (l *Local) Lock() (unlock func(), err error) {
	l.lk.Lock()
	defer l.lk.Unlock()
	if l.lockN > 0 {
		l.lockN++
		return l.unlockOnce(), nil
	}
	path := filepath.Join(l.dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("lock checkpoint directory %s: %w", l.dir, err)
	}
	if err := flock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errWouldBlock) {
			pid := "unknown"
			if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
				pid = strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("checkpoint directory %s is in use by another run of a job (pid %s; lock file %s): %w", l.dir, pid, path, ErrLocked)
		}
		return nil, fmt.Errorf("lock checkpoint directory %s: %w", l.dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	l.lockF, l.lockN = f, 1
	return l.unlockOnce(), nil
}

func (l *Local) unlockOnce() func() {
	done := false
	return func() {
		l.lk.Lock()
		defer l.lk.Unlock()
		if done {
			return
		}
		done = true
		l.lockN--
		if l.lockN == 0 {
			_ = l.lockF.Close() // releases the lock
			l.lockF = nil
		}
	}
}

// LatestCompleted returns the id of the newest completed checkpoint that
// dir records (in <dir>/_latest, replaced after every completed
// checkpoint), and false if it records none.
func LatestCompleted(dir string) (int64, bool, error) {
	path := filepath.Join(dir, latestFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read latest completed checkpoint: %w", err)
	}
	kind, id, ok := parseDirName(strings.TrimSpace(string(b)))
	if !ok || kind != Checkpoint {
		return 0, false, fmt.Errorf("read latest completed checkpoint: %s: %w", path, corruptf("invalid content %q", strings.TrimSpace(string(b))))
	}
	return id, true, nil
}

func (l *Local) setLatest(id int64) error {
	if err := replaceFile(l.fs, filepath.Join(l.dir, latestFileName), []byte(dirName(Checkpoint, id)+"\n")); err != nil {
		return fmt.Errorf("record latest completed checkpoint %d: %w", id, err)
	}
	return nil
}

// Newest finds the newest completed checkpoint in dir: the newest of the
// checkpoints listed there (those with _metadata, readable or not) and the
// one the directory records as completed last (LatestCompleted), which
// still counts when its _metadata or its whole directory is gone. ok is
// false if there is none. damaged is nil if that checkpoint's _metadata
// reads; otherwise it says what is wrong (wrapping ErrCorrupt or
// ErrNotFound). Newest does not load the state; Load verifies it.
func Newest(ctx context.Context, dir string) (id int64, ok bool, damaged error, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, false, nil, err
	}
	infos, err := listDir(ctx, abs)
	if err != nil {
		return 0, false, nil, err
	}
	rec, recOK, rerr := LatestCompleted(abs)
	var listed *Info
	for i := range slices.Backward(infos) {
		if infos[i].Kind == Checkpoint {
			listed = &infos[i]
			break
		}
	}
	switch {
	case listed != nil && (!recOK || listed.ID >= rec):
		return listed.ID, true, listed.Warning, rerr
	case recOK:
		path := filepath.Join(abs, dirName(Checkpoint, rec))
		what := "its _metadata is missing"
		if _, serr := os.Lstat(path); errors.Is(serr, fs.ErrNotExist) {
			what = "its directory is missing"
		}
		return rec, true, fmt.Errorf("checkpoint %d: %s: %s, but %s records it as the latest completed checkpoint: %w",
			rec, path, what, filepath.Join(abs, latestFileName), ErrNotFound), nil
	case rerr != nil:
		return 0, false, nil, rerr
	}
	return 0, false, nil, nil
}

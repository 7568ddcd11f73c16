//go:build unix

package checkpoint

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestModesArePrivate checks that everything a Local writes (directories,
// state and metadata files, the job id and lock files, savepoints) is
// private to the owner: 0700 directories, 0600 files, whatever the umask
// lets through beyond that.
func TestModesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b", "checkpoints")
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := l.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := l.SetJobID("0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Save(ctx, snap(1, Checkpoint)); err != nil {
		t.Fatal(err)
	}
	if _, err := SaveSavepoint(ctx, filepath.Join(base, "sp", "x"), snap(2, Checkpoint)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, root := range []string{filepath.Join(base, "a"), filepath.Join(base, "sp")} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n++
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s: mode %#o, want %#o", p, got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 8 {
		t.Fatalf("walked only %d entries", n)
	}
}

// recordSyncFS records the directories fsynced.
type recordSyncFS struct {
	osFS
	synced []string
}

func (r *recordSyncFS) SyncDir(path string) error {
	r.synced = append(r.synced, path)
	return r.osFS.SyncDir(path)
}

// TestNewDirectoriesAreDurable checks that the parents of directories
// NewLocal creates are fsynced, so the new entries survive a power loss.
func TestNewDirectoriesAreDurable(t *testing.T) {
	base := t.TempDir()
	rfs := &recordSyncFS{}
	dir := filepath.Join(base, "x", "y")
	if _, err := NewLocal(dir, withFS(rfs)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{base, filepath.Join(base, "x")} {
		if !slices.Contains(rfs.synced, want) {
			t.Errorf("%s not fsynced after creating its child; synced: %v", want, rfs.synced)
		}
	}
	// An existing directory: nothing to sync.
	rfs.synced = nil
	if _, err := NewLocal(dir, withFS(rfs)); err != nil {
		t.Fatal(err)
	}
	if len(rfs.synced) != 0 {
		t.Errorf("existing directory: synced %v", rfs.synced)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

package checkpoint

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// fileSystem is what a save writes through. Reads use package os directly.
// Every method returns errors that name the operation and the path
// (*fs.PathError or *os.LinkError), as package os does.
type fileSystem interface {
	MkdirAll(path string, perm fs.FileMode) error
	Mkdir(path string, perm fs.FileMode) error
	// CreateExcl creates a new file for writing; it fails if path exists.
	CreateExcl(path string) (writableFile, error)
	Rename(oldpath, newpath string) error
	Remove(path string) error
	RemoveAll(path string) error
	// SyncDir makes the entries of directory path durable.
	SyncDir(path string) error
}

type writableFile interface {
	io.Writer
	Sync() error
	Close() error
}

// Checkpoint data is private to the owner: it holds source positions,
// file names and whatever state operators keep.
const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
)

// mkdirAllDurable creates path and its missing parents, and fsyncs the
// parent of every directory it created, so the new entries survive a
// crash of the machine.
func mkdirAllDurable(fsys fileSystem, path string) error {
	var missing []string
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := fsys.MkdirAll(path, dirPerm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

type osFS struct{}

func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Mkdir(path string, perm fs.FileMode) error    { return os.Mkdir(path, perm) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(path string) error                     { return os.Remove(path) }
func (osFS) RemoveAll(path string) error                  { return os.RemoveAll(path) }

func (osFS) CreateExcl(path string) (writableFile, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
}

func (osFS) SyncDir(path string) error {
	if runtime.GOOS == "windows" {
		// Directories cannot be opened for syncing on Windows; renames are
		// durable once they return.
		return nil
	}
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

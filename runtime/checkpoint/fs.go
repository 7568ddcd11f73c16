package checkpoint

import (
	"io"
	"io/fs"
	"os"
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

const (
	dirPerm  fs.FileMode = 0o755
	filePerm fs.FileMode = 0o644
)

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

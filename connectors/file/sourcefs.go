package file

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// SourceFS is storage a source reads its files from instead of the local
// file system ([WithSourceFS]). Package connectors/s3 implements it for
// S3-compatible object storage. Paths are those given to [NewSource],
// passed as they are.
type SourceFS interface {
	// List returns the files that pattern names: the file itself, every
	// file under it if it is a directory (a key prefix followed by '/'),
	// or those matching it if it holds a glob metacharacter (path.Match
	// syntax). A pattern that names nothing is an error wrapping
	// fs.ErrNotExist, except a glob, which may match nothing.
	List(ctx context.Context, pattern string) ([]FileStat, error)
	// Open opens a file for reading.
	Open(ctx context.Context, path string) (SourceFile, error)
}

// FileStat describes a file listed by a SourceFS.
type FileStat struct {
	Path    string
	Size    int64
	ModTime time.Time
}

// SourceFile is an open file of a SourceFS: sequential reads from a
// position set by Seek, and random reads (ReadAt) for formats that read a
// footer. Stat's Size is the file's length.
type SourceFile interface {
	io.Reader
	io.Seeker
	io.ReaderAt
	io.Closer
	Stat() (fs.FileInfo, error)
}

// WithSourceFS makes the source list and read its paths on fsys instead
// of the local file system (default: the local file system, package os).
// The file filter ([FileFilter]) sees every listed path and the
// directories (key prefixes) between the listed pattern and the file.
func WithSourceFS(fsys SourceFS) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) {
		if fsys == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithSourceFS file system is nil", ErrInvalidConfig))
			return
		}
		c.fsys = fsys
	})
}

// listFS is listFiles on a SourceFS.
func listFS(ctx context.Context, fsys SourceFS, paths []string, filter func(string) bool) ([]fileInfo, error) {
	seen := map[string]bool{}
	var out []fileInfo
	for _, pattern := range paths {
		files, err := fsys.List(ctx, pattern)
		if err != nil {
			return nil, fmt.Errorf("file: list %q: %w", pattern, err)
		}
		root := pattern
		if i := strings.IndexAny(root, "*?["); i >= 0 {
			root = root[:i]
		}
		root = strings.TrimSuffix(root, "/")
	files:
		for _, f := range files {
			if seen[f.Path] {
				continue
			}
			// Every directory between the root and the file, and the
			// file, must pass the filter.
			rel := strings.TrimPrefix(strings.TrimPrefix(f.Path, root), "/")
			dirs := strings.Split(rel, "/")
			for i := 1; i <= len(dirs); i++ {
				p := path.Join(root, strings.Join(dirs[:i], "/"))
				if p != pattern && !filter(p) {
					continue files
				}
			}
			seen[f.Path] = true
			out = append(out, fileInfo{path: f.Path, size: f.Size, mtime: f.ModTime.UnixNano()})
		}
	}
	slices.SortFunc(out, func(a, b fileInfo) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// list lists the source's paths on its file system.
func (c *sourceConfig) list(ctx context.Context) ([]fileInfo, error) {
	if c.fsys != nil {
		return listFS(ctx, c.fsys, c.paths, c.filter)
	}
	return listFiles(ctx, c.paths, c.filter)
}

// openFile opens a file of the source's file system.
func (c *sourceConfig) openFile(ctx context.Context, name string) (SourceFile, error) {
	if c.fsys != nil {
		return c.fsys.Open(ctx, name)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

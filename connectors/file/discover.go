package file

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// fileInfo is a discovered file.
type fileInfo struct {
	path  string
	size  int64
	mtime int64
}

// defaultFileFilter skips hidden files and directories (names starting
// with '.' or '_'), like Flink's; the file sink's in-progress files are
// hidden.
func defaultFileFilter(path string) bool {
	base := filepath.Base(path)
	return !strings.HasPrefix(base, ".") && !strings.HasPrefix(base, "_")
}

// listFiles expands every path (a file, a directory read recursively, or a
// glob pattern whose matches are files or directories) into regular files,
// sorted by path, without duplicates.
func listFiles(ctx context.Context, paths []string, filter func(string) bool) ([]fileInfo, error) {
	seen := map[string]bool{}
	var out []fileInfo
	add := func(p string, info fs.FileInfo) {
		if !seen[p] && info.Mode().IsRegular() && filter(p) {
			seen[p] = true
			out = append(out, fileInfo{path: p, size: info.Size(), mtime: info.ModTime().UnixNano()})
		}
	}
	for _, pattern := range paths {
		matches := []string{pattern}
		if strings.ContainsAny(pattern, "*?[") {
			m, err := filepath.Glob(pattern)
			if err != nil {
				return nil, fmt.Errorf("file: glob %q: %w", pattern, err)
			}
			matches = m
		}
		for _, root := range matches {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			info, err := os.Stat(root)
			if err != nil {
				if os.IsNotExist(err) && root != pattern {
					continue // vanished between glob and stat
				}
				return nil, fmt.Errorf("file: list %q: %w", root, err)
			}
			if !info.IsDir() {
				add(root, info)
				continue
			}
			err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					if os.IsNotExist(err) {
						return nil
					}
					return err
				}
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				if p != root && !filter(p) {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
				if d.IsDir() {
					return nil
				}
				fi, err := d.Info()
				if err != nil {
					if os.IsNotExist(err) {
						return nil
					}
					return err
				}
				add(p, fi)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("file: list %q: %w", root, err)
			}
		}
	}
	slices.SortFunc(out, func(a, b fileInfo) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// compression of a file, by its extension.
type compression int

const (
	uncompressed compression = iota
	gzipped
	zstded
)

func compressionOf(path string) compression {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".gz", ".gzip":
		return gzipped
	case ".zst", ".zstd":
		return zstded
	}
	return uncompressed
}

// splitFile cuts a file into splits: blocks of blockSize bytes for an
// uncompressed file in a splittable format, else one split.
func splitFile(f fileInfo, splittable bool, blockSize int64) []Split {
	whole := Split{Path: f.path, End: -1, Size: f.size, ModTime: f.mtime}
	if !splittable || compressionOf(f.path) != uncompressed || blockSize <= 0 || f.size <= blockSize {
		return []Split{whole}
	}
	var out []Split
	for start := int64(0); start < f.size; start += blockSize {
		end := start + blockSize
		if end >= f.size {
			end = -1 // the last block reads to the end
		}
		out = append(out, Split{Path: f.path, Start: start, End: end, Offset: start, Size: f.size, ModTime: f.mtime})
	}
	return out
}

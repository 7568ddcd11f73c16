package file

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// LineAt returns the number (from 1) of the line of path that starts at
// byte offset (of the decompressed file): the line of a record that a
// [PositionAs] function was given offset for. It reads the file up to
// offset again, so it is meant for the error of a record that fails a job;
// 0 means unknown (the file cannot be read again).
func LineAt(path string, offset int64) int64 {
	if offset == 0 {
		return 1
	}
	n := lineEndingAt(path, offset)
	if n == 0 {
		return 0
	}
	return n + 1
}

// lineEndingAt returns the number (from 1) of the line of path that ends
// right before byte end (of the decompressed file): the line of a record
// that a line-based reader reported with end as its next offset. It reads
// the file up to end again, so it is only called when a record fails the
// job; 0 means unknown (the file cannot be read again).
func lineEndingAt(path string, end int64) int64 {
	if end <= 0 {
		return 0
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var in io.Reader = bufio.NewReaderSize(f, defaultReadBuffer)
	switch compressionOf(path) {
	case gzipped:
		zr, err := gzip.NewReader(in)
		if err != nil {
			return 0
		}
		defer zr.Close()
		in = zr
	case zstded:
		zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return 0
		}
		defer zr.Close()
		in = zr
	}
	var c lineCounter
	if _, err := io.CopyN(&c, in, end); err != nil {
		return 0
	}
	if c.last != '\n' {
		c.lines++ // the last line has no terminator
	}
	return c.lines
}

// lineCounter counts the '\n' written to it and keeps the last byte.
type lineCounter struct {
	lines int64
	last  byte
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	if len(p) > 0 {
		c.last = p[len(p)-1]
	}
	return len(p), nil
}

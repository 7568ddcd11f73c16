package file

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// Format decodes the records of one file for a [Source]. T is the record
// type. A Format is shared by all readers and must be safe for concurrent
// use; the RecordReaders it makes are used by one goroutine each.
//
// Formats that are not line based (Parquet, Avro container files) implement
// the same interface: they return Splittable false, and resume through the
// split's byte offset plus a number of records to skip (see [Split]). Those
// that need the whole file (a header or a footer) implement
// [RandomAccessFormat] too.
type Format[T any] interface {
	// Splittable reports whether every record starts right after a '\n'
	// (or at the start of the file), so that a large uncompressed file may
	// be cut into blocks: the block that contains a record's first byte
	// reads it.
	Splittable() bool
	// NewReader returns a reader of the records in r. r is positioned at
	// byte offset (of the decompressed file), which is 0 or the offset a
	// RecordReader of this format reported after a record.
	NewReader(r io.Reader, offset int64) (RecordReader[T], error)
}

// RecordReader reads the records of one file, in order.
type RecordReader[T any] interface {
	// Read returns the next record and the byte offset right after it,
	// where reading resumes. At the end of the file it returns io.EOF. A
	// record that cannot be decoded returns an error wrapping
	// [ErrMalformed] together with the offset after the bad record, so
	// that reading can go on; any other error ends the file.
	//
	// A format whose records cannot be resumed at one by one (records in
	// compressed blocks or row groups) returns, while records of a block
	// remain, the offset of the block's start: the source counts the
	// records read since the offset last changed and resumes at that
	// offset skipping that many records ([Split].Skip).
	Read() (v T, next int64, err error)
}

// RandomAccessFormat is a [Format] that reads a file through io.ReaderAt:
// Avro container files (the schema is in the header) and Parquet (the
// footer describes the file). The source calls NewReaderAt for
// uncompressed files and NewReader, from the start of the decompressed
// stream, for compressed ones.
type RandomAccessFormat[T any] interface {
	Format[T]
	// NewReaderAt returns a reader of the file r of size bytes that
	// resumes at offset (0, or an offset its RecordReader returned) and
	// skips skip records after it.
	NewReaderAt(r io.ReaderAt, size, offset, skip int64) (RecordReader[T], error)
}

// defaultReadBuffer is the size of the buffered reader over each file.
const defaultReadBuffer = 256 << 10

// lineScanner reads '\n'-terminated lines and tracks byte offsets.
type lineScanner struct {
	br  *bufio.Reader
	off int64
	buf []byte
}

func newLineScanner(r io.Reader, offset int64) *lineScanner {
	return &lineScanner{br: bufio.NewReaderSize(r, defaultReadBuffer), off: offset}
}

// next returns the next line without its "\n" or "\r\n" and the offset
// after it. The slice is valid until the next call.
func (s *lineScanner) next() ([]byte, int64, error) {
	line, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.buf = append(s.buf[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.br.ReadSlice('\n')
			s.buf = append(s.buf, line...)
		}
		line = s.buf
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, s.off, err
	}
	if len(line) == 0 {
		return nil, s.off, io.EOF
	}
	s.off += int64(len(line))
	if n := len(line); line[n-1] == '\n' {
		line = line[:n-1]
		if n > 1 && line[n-2] == '\r' {
			line = line[:n-2]
		}
	} else if line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, s.off, nil
}

// TextLines is the format of text files with one record per line. Lines
// end with "\n" or "\r\n" (not part of the record); a last line without a
// terminator is a record too. It is splittable.
//
// The source reads lines in batches and copies the lines of a batch into
// strings of about 32 KiB, handing out each line as a substring: one
// allocation for a few hundred lines instead of one per line. A line that
// is kept for long keeps its 32 KiB alive; strings.Clone it to keep only
// the line.
func TextLines() Format[string] { return textLines{} }

type textLines struct{}

func (textLines) Splittable() bool { return true }

func (textLines) NewReader(r io.Reader, offset int64) (RecordReader[string], error) {
	return &textReader{s: newLineScanner(r, offset)}, nil
}

// textChunk is the most the strings that the lines of a batch share
// hold (unless one line is longer): 32 KiB is the largest small-object
// size class, so no byte of them is wasted.
const textChunk = 32 << 10

type textReader struct {
	s    *lineScanner
	acc  []byte // lines not yet turned into a string
	ends []int  // the end of each of them in acc
}

func (t *textReader) Read() (string, int64, error) {
	line, next, err := t.s.next()
	if err != nil {
		return "", next, err
	}
	return string(line), next, nil
}

var _ batchReader[string] = (*textReader)(nil)

func (t *textReader) readBatch(dst []string, max int, end int64, starts *[]int64) ([]string, int64, error) {
	// Local slices: storing to the fields for every line would cost a
	// write barrier each while the GC runs.
	acc, ends := t.acc[:0], t.ends[:0]
	if acc == nil {
		acc = make([]byte, 0, textChunk)
	}
	defer func() { t.acc, t.ends = acc[:0], ends[:0] }()
	var err error
	for range max {
		if end >= 0 && t.s.off >= end {
			err = io.EOF
			break
		}
		start := t.s.off
		var line []byte
		if line, _, err = t.s.next(); err != nil {
			break
		}
		if starts != nil {
			*starts = append(*starts, start)
		}
		if len(acc)+len(line) > textChunk && len(acc) > 0 {
			dst = substrings(dst, acc, ends)
			acc, ends = acc[:0], ends[:0]
		}
		acc = append(acc, line...)
		ends = append(ends, len(acc))
	}
	return substrings(dst, acc, ends), t.s.off, err
}

// substrings appends the lines of acc, which end at ends, to dst as
// substrings of one string.
func substrings(dst []string, acc []byte, ends []int) []string {
	all := string(acc)
	start := 0
	for _, e := range ends {
		dst = append(dst, all[start:e])
		start = e
	}
	return dst
}

// JSONLines is the format of files with one JSON value per line, decoded
// with [jsonrecord.Unmarshal] into a T (the Kafka JSON deserializer uses the
// same decoder). Blank lines are skipped. A line that is not valid JSON for
// T is malformed (see [ErrMalformed]), and so is a line that
// encoding/json would rewrite silently: invalid UTF-8, a key repeated in
// one object, a null line, or a line that is not an object where T is a
// map or a struct. Decoded into map[string]any or any, numbers are exact:
// int64, float64, or json.Number where a float64 would change them
// (12345678901234567891, 1.0), so writing the records back with
// [JSONLinesFormat] keeps every number's bytes. The source's error for a
// malformed line names its line number and the byte position in the line.
// It is splittable.
func JSONLines[T any]() Format[T] { return jsonLines[T]{} }

type jsonLines[T any] struct{}

func (jsonLines[T]) Splittable() bool { return true }

func (jsonLines[T]) NewReader(r io.Reader, offset int64) (RecordReader[T], error) {
	return jsonReader[T]{newLineScanner(r, offset)}, nil
}

type jsonReader[T any] struct{ s *lineScanner }

func (j jsonReader[T]) Read() (T, int64, error) {
	var v T
	for {
		line, next, err := j.s.next()
		if err != nil {
			return v, next, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := jsonrecord.Unmarshal(line, &v); err != nil {
			var zero T
			return zero, next, &rawError{raw: bytes.Clone(line), err: fmt.Errorf("%w: JSON line: %w", ErrMalformed, err)}
		}
		return v, next, nil
	}
}

// CSVOption configures [CSV].
type CSVOption interface{ apply(*csvConfig) }

type csvOptionFunc func(*csvConfig)

func (f csvOptionFunc) apply(c *csvConfig) { f(c) }

type csvConfig struct {
	header bool
	comma  rune
}

// CSVHeader makes the first record of every file a header that is skipped
// (default: no header).
func CSVHeader() CSVOption { return csvOptionFunc(func(c *csvConfig) { c.header = true }) }

// CSVComma sets the field delimiter (default ',').
func CSVComma(r rune) CSVOption { return csvOptionFunc(func(c *csvConfig) { c.comma = r }) }

// CSV is the format of comma-separated values (RFC 4180, encoding/csv),
// one []string per record; records may have different numbers of fields.
// Quoted fields may hold line breaks, so CSV files are not splittable: one
// split reads a whole file.
func CSV(opts ...CSVOption) Format[[]string] {
	c := csvConfig{comma: ','}
	for _, o := range opts {
		o.apply(&c)
	}
	return csvFormat{c}
}

type csvFormat struct{ c csvConfig }

func (csvFormat) Splittable() bool { return false }

func (f csvFormat) NewReader(r io.Reader, offset int64) (RecordReader[[]string], error) {
	cr := csv.NewReader(bufio.NewReaderSize(r, defaultReadBuffer))
	cr.Comma = f.c.comma
	cr.FieldsPerRecord = -1
	return &csvReader{r: cr, base: offset, skipHeader: f.c.header && offset == 0}, nil
}

type csvReader struct {
	r          *csv.Reader
	base       int64
	skipHeader bool
}

func (c *csvReader) Read() ([]string, int64, error) {
	if c.skipHeader {
		c.skipHeader = false
		if _, err := c.r.Read(); err != nil {
			return nil, c.base + c.r.InputOffset(), c.wrap(err)
		}
	}
	rec, err := c.r.Read()
	return rec, c.base + c.r.InputOffset(), c.wrap(err)
}

func (c *csvReader) wrap(err error) error {
	if pe, ok := errors.AsType[*csv.ParseError](err); ok {
		return fmt.Errorf("%w: CSV line %d: %w", ErrMalformed, pe.StartLine, err)
	}
	return err
}

// rawError carries the bytes of a malformed record with its error, for
// dead letters and error messages.
type rawError struct {
	raw []byte
	err error
}

func (e *rawError) Error() string { return e.err.Error() }
func (e *rawError) Unwrap() error { return e.err }

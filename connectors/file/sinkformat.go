package file

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// RowFormat encodes records one at a time into a part file (Flink's
// Encoder). A row-format part file may stay open across checkpoints: at a
// checkpoint its length is recorded, and after a failure it is truncated
// to that length and appended to. A RowFormat is shared by all writers and
// must be safe for concurrent use.
type RowFormat[T any] interface {
	// AppendRecord appends the encoding of v, including any terminator,
	// to dst and returns the extended slice.
	AppendRecord(dst []byte, v T) ([]byte, error)
}

// BulkFormat writes a part file as a whole (Flink's BulkWriter.Factory),
// for formats with headers, footers or compression that cannot be
// appended to after a restart: a bulk part file is rolled at every
// checkpoint. A BulkFormat is shared by all writers and must be safe for
// concurrent use; the BulkWriters it makes are used by one goroutine.
type BulkFormat[T any] interface {
	// NewWriter starts a part file written to w.
	NewWriter(w io.Writer) (BulkWriter[T], error)
}

// BulkWriter writes the records of one bulk part file.
type BulkWriter[T any] interface {
	// Write adds a record.
	Write(v T) error
	// Finish writes what is buffered and any footer; the sink then syncs
	// and closes the file. Write is not called after Finish.
	Finish() error
}

// LinesFormat writes each string as one line, terminated by "\n". It is
// the counterpart of [TextLines]; a string containing "\n" becomes
// several lines.
func LinesFormat() RowFormat[string] { return linesFormat{} }

type linesFormat struct{}

func (linesFormat) AppendRecord(dst []byte, v string) ([]byte, error) {
	dst = append(dst, v...)
	return append(dst, '\n'), nil
}

// JSONLinesFormat writes each record as one line of JSON
// (encoding/json), the counterpart of [JSONLines]. A json.RawMessage
// without a line break is written as is, without validation.
func JSONLinesFormat[T any]() RowFormat[T] { return jsonLinesFormat[T]{} }

type jsonLinesFormat[T any] struct{}

func (jsonLinesFormat[T]) AppendRecord(dst []byte, v T) ([]byte, error) {
	if raw, ok := any(v).(json.RawMessage); ok && len(raw) > 0 && bytes.IndexByte(raw, '\n') < 0 {
		// Already encoded (for example read with JSONLines): written as
		// is, without validation.
		dst = append(dst, raw...)
		return append(dst, '\n'), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("file: encode JSON: %w", err)
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

// CSVFormat writes each []string as one CSV record (encoding/csv quoting,
// "\n" line ends), the counterpart of [CSV].
func CSVFormat() RowFormat[[]string] { return csvFormatOut{} }

type csvFormatOut struct{}

func (csvFormatOut) AppendRecord(dst []byte, v []string) ([]byte, error) {
	var sb strings.Builder
	w := csv.NewWriter(&sb)
	if err := w.Write(v); err != nil {
		return dst, fmt.Errorf("file: encode CSV: %w", err)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return dst, fmt.Errorf("file: encode CSV: %w", err)
	}
	return append(dst, sb.String()...), nil
}

// GzipBulk is a bulk format that writes rows with row and compresses the
// part file with gzip; give the sink PartSuffix(".gz") so that [Source]
// decompresses it.
func GzipBulk[T any](row RowFormat[T]) BulkFormat[T] { return gzipBulk[T]{row} }

type gzipBulk[T any] struct{ row RowFormat[T] }

func (g gzipBulk[T]) NewWriter(w io.Writer) (BulkWriter[T], error) {
	zw := gzip.NewWriter(w)
	return &gzipBulkWriter[T]{row: g.row, zw: zw, bw: bufio.NewWriterSize(zw, 64<<10)}, nil
}

type gzipBulkWriter[T any] struct {
	row RowFormat[T]
	zw  *gzip.Writer
	bw  *bufio.Writer
	buf []byte
}

func (g *gzipBulkWriter[T]) Write(v T) error {
	var err error
	g.buf, err = g.row.AppendRecord(g.buf[:0], v)
	if err != nil {
		return err
	}
	_, err = g.bw.Write(g.buf)
	return err
}

func (g *gzipBulkWriter[T]) Finish() error {
	if err := g.bw.Flush(); err != nil {
		return err
	}
	return g.zw.Close()
}

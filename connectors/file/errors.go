package file

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sluice-io/sluice/restart"
)

// ErrInvalidConfig is wrapped by configuration errors; the message names
// the option and what is allowed.
var ErrInvalidConfig = errors.New("file: invalid configuration")

// ErrMalformed is wrapped by errors of records that a format cannot
// decode. Under [FailOnMalformed] (the default) the reader fails with a
// [*RecordError] wrapping it; under [SkipMalformed] the record is skipped
// and counted in numRecordsInErrors.
var ErrMalformed = errors.New("file: malformed record")

// ErrBucketEscapes is wrapped by the error of a bucket path that does not
// stay under the sink's base directory (an absolute path or one with "..").
var ErrBucketEscapes = errors.New("file: bucket path escapes the base directory")

// RecordError names the file and byte offset of a record that could not be
// read or decoded. Offsets of compressed files count decompressed bytes.
type RecordError struct {
	File   string
	Offset int64
	// Line is the number (from 1) of the line that holds a malformed
	// record of a line-based format (JSON lines, text lines); 0 when
	// unknown.
	Line int64
	Err  error
}

func (e *RecordError) Error() string {
	var rec string
	if re, ok := errors.AsType[*rawError](e.Err); ok {
		rec = "; record: " + excerpt(re.raw)
	}
	if e.Line > 0 {
		return fmt.Sprintf("file: %s line %d (offset %d): %v%s", e.File, e.Line, e.Offset, e.Err, rec)
	}
	return fmt.Sprintf("file: %s at offset %d: %v%s", e.File, e.Offset, e.Err, rec)
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

// Is reports a malformed record as restart.ErrUnrecoverable: restored from
// a checkpoint, the job would read the same record and fail again, so it
// fails at once instead of restarting.
func (e *RecordError) Is(target error) bool {
	return target == restart.ErrUnrecoverable && errors.Is(e.Err, ErrMalformed)
}

// excerptMax bounds the part of a record an error shows.
const excerptMax = 256

// excerpt quotes b for an error message, cut to excerptMax bytes at a
// character boundary.
func excerpt(b []byte) string {
	if len(b) <= excerptMax {
		return fmt.Sprintf("%q", b)
	}
	cut := excerptMax
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:cut], len(b))
}

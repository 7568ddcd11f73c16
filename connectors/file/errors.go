package file

import (
	"errors"
	"fmt"
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
	if e.Line > 0 {
		return fmt.Sprintf("file: %s line %d (offset %d): %v", e.File, e.Line, e.Offset, e.Err)
	}
	return fmt.Sprintf("file: %s at offset %d: %v", e.File, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

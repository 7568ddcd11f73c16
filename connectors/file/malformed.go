package file

import "fmt"

// MalformedError returns the error a [RecordReader] returns for a record
// it cannot decode: it wraps [ErrMalformed] and err, and carries raw, the
// record's bytes, for a dead letter ([Malformed].Raw) and for the
// excerpt in the reader's error.
func MalformedError(raw []byte, err error) error {
	return &rawError{raw: raw, err: fmt.Errorf("%w: %w", ErrMalformed, err)}
}

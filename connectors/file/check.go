package file

import (
	"fmt"
	"sync"
)

// checkBufs are scratch buffers of Check.
var checkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Check reports whether v can be written with the format's schema: the
// error Write would return for it (naming the field path), without
// writing anything. [ParquetBulk] coerces values as AvroBulk does, so
// AvroBulk(schema).Check checks records for a ParquetBulk of the same
// schema too. It is safe for concurrent use. An invalid format returns
// Err.
func (b *AvroBulkFormat) Check(v map[string]any) error {
	if b.err != nil {
		return b.err
	}
	buf := checkBufs.Get().(*[]byte)
	var e avroEncoder
	out, err := e.encode((*buf)[:0], v, b.schema, "")
	if cap(out) <= 64<<10 {
		*buf = out[:0]
		checkBufs.Put(buf)
	}
	if err != nil {
		return fmt.Errorf("file: Avro record: %w", err)
	}
	return nil
}

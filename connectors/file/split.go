package file

import (
	"fmt"

	"github.com/sluice-io/sluice/serde"
)

// Split is one file, or one block of a large uncompressed file in a
// splittable format, with the reader's progress in it.
//
// A split reads the records that start in [Start, End). Offset is where
// reading resumes: the byte offset (of the decompressed file) of the next
// record, after which Skip more records are skipped. A split that has not
// read anything yet has Offset == Start and, if Start > 0, first moves to
// the first record that starts at or after Start.
type Split struct {
	// Path is the file's path as discovered.
	Path string `json:"path"`
	// Start and End delimit the block; End is -1 for a split that reads
	// to the end of the file.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Offset is the position of the next record to read.
	Offset int64 `json:"offset"`
	// Skip is the number of records to skip after Offset.
	Skip int64 `json:"skip,omitempty"`
	// Size and ModTime (Unix nanoseconds) describe the file when it was
	// discovered.
	Size    int64 `json:"size"`
	ModTime int64 `json:"mtime"`
}

// SplitID is the path and the block's start offset.
func (s Split) SplitID() string { return fmt.Sprintf("%s@%d", s.Path, s.Start) }

// EnumState is the checkpointed state of the enumerator.
type EnumState struct {
	// Pending holds the splits not assigned yet, in assignment order.
	Pending []Split `json:"pending"`
	// Listed is true once a bounded source listed its paths: it never
	// lists them again.
	Listed bool `json:"listed,omitempty"`
	// Processed holds, in continuous mode, the files already turned into
	// splits that were still present at the last discovery: a file is
	// never read twice, and a file that disappeared is forgotten, so the
	// set is bounded by the number of files under the paths.
	Processed []string `json:"processed,omitempty"`
}

var (
	splitSerde = serde.JSON[Split](1)
	enumSerde  = serde.JSON[EnumState](1)
)

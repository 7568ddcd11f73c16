package checkpoint

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// The snapshot codec for storages outside this package (object storage,
// connectors/s3): the same state file and _metadata formats as Local, so
// a snapshot copied between storages loads anywhere.

// MetadataName and StateName are the names of the two files of a
// snapshot (see the package documentation).
const (
	MetadataName = metadataFileName
	StateName    = stateFileName
)

// Encode validates s, writes its state file to w and returns the content
// of its _metadata file (written last by the storage: its presence marks
// the snapshot complete) and the Info of the snapshot at path. A zero
// Timestamp is stored as the current time, in UTC. w is not closed.
func Encode(ctx context.Context, w io.Writer, s *Snapshot, path string) (metadata []byte, info Info, err error) {
	if err := validate(s); err != nil {
		return nil, Info{}, err
	}
	snap := *s
	snap.Timestamp = normalizeTime(s.Timestamp)
	cw := &crcWriter{w: w}
	bw := bufio.NewWriterSize(cw, ioBufferSize)
	cnt := &countingWriter{w: bw}
	e := encoder{w: cnt}
	if err := e.snapshot(ctx, &snap); err != nil {
		return nil, Info{}, fmt.Errorf("%s %d: encode state: %w", snap.Kind, snap.ID, err)
	}
	if err := bw.Flush(); err != nil {
		return nil, Info{}, fmt.Errorf("%s %d: write state: %w", snap.Kind, snap.ID, err)
	}
	m := snapshotMetadata(&snap)
	m.StateSize, m.StateCRC32C = cnt.n, cw.crc
	b, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return nil, Info{}, fmt.Errorf("%s %d: encode metadata: %w", snap.Kind, snap.ID, err)
	}
	return append(b, '\n'), m.info(path), nil
}

func snapshotMetadata(s *Snapshot) metadata {
	return metadata{FormatVersion: formatVersion, ID: s.ID, Kind: s.Kind, Job: s.JobName, Timestamp: s.Timestamp,
		StateFile: stateFileName, Tasks: len(s.Tasks)}
}

// DecodeInfo parses and validates the content of a _metadata file; path
// is the snapshot's (named in errors and set in Info.Path). It also
// returns the state file's name (relative to path) and size.
func DecodeInfo(metadata []byte, path string) (info Info, stateFile string, stateSize int64, err error) {
	m, err := parseMetadata(metadata, path+"/"+MetadataName)
	if err != nil {
		return Info{}, "", 0, err
	}
	return m.info(path), m.StateFile, m.StateSize, nil
}

// Decode decodes and verifies a snapshot from the content of its
// _metadata file and its state file, read from state; path is the
// snapshot's (named in errors and set in Info.Path). Errors wrap
// ErrCorrupt as Load's do.
func Decode(ctx context.Context, metadata []byte, state io.Reader, path string) (*Snapshot, Info, error) {
	m, err := parseMetadata(metadata, path+"/"+MetadataName)
	if err != nil {
		return nil, Info{}, fmt.Errorf("load snapshot: %w", err)
	}
	s, err := decodeState(ctx, state, path+"/"+m.StateFile, m)
	if err != nil {
		return nil, Info{}, fmt.Errorf("%s %d: %w", m.Kind, m.ID, err)
	}
	return s, m.info(path), nil
}

// ParseName parses a snapshot directory name: chk-<id> or
// savepoint-<id>.
func ParseName(name string) (Kind, int64, bool) { return parseDirName(name) }

// Name is the directory name of a snapshot: chk-<id> or savepoint-<id>.
func Name(k Kind, id int64) string { return dirName(k, id) }

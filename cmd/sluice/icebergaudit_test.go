package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/sluice-io/sluice/checkpoint"
)

// The audit of an Iceberg table against the job's checkpoints and the
// files in storage, for the binary Iceberg tests. The tests run the
// pipeline with checkpoint.retain high enough to keep every completed
// checkpoint (CHECKPOINT_RETAIN), so that the checkpoints record, in
// their sink committables, every data file of every checkpoint: the
// runtime's account of what the table must hold, independent of the
// table (read by PyIceberg) and of the sink's logs.

// icebergCheckpointFiles reads every completed checkpoint and savepoint
// in dir and returns the data files of the Iceberg sink's committables
// found in them, by the checkpoint they were prepared at. env is the
// environment the runs had on top of the test's: the CLI stores values
// of ${VAR}s in checkpoints as references to the variables (the warehouse
// location is one), which are resolved with it. A file found under two
// checkpoints fails t.
func icebergCheckpointFiles(t *testing.T, dir string, env []string) (files map[int64]map[string]bool, snapshots int) {
	t.Helper()
	ctx := t.Context()
	vars := map[string]string{}
	for _, kv := range append(os.Environ(), env...) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	infos, err := checkpoint.ListDir(ctx, dir)
	if err != nil {
		t.Fatalf("list the checkpoints in %s: %v", dir, err)
	}
	files = map[int64]map[string]bool{}
	where := map[string]int64{}
	for _, in := range infos {
		if in.Warning != nil {
			t.Fatalf("checkpoint %s: %v", in.Path, in.Warning)
		}
		s, _, err := checkpoint.Load(ctx, in.Path)
		if err != nil {
			t.Fatalf("load %s: %v", in.Path, err)
		}
		snapshots++
		for _, ts := range s.Tasks {
			for _, b := range ts.Parts["committables"] {
				// 8 bytes of checkpoint id (the runtime's), 4 of serializer
				// version (serde.Marshal), then the sink's JSON
				// (connectors/iceberg committable), with the CLI's
				// references to variables
				b, err := icebergResolveRefs(b, vars)
				if err != nil {
					t.Fatalf("%s, task %s/%d: %v", in.Path, ts.Vertex, ts.Subtask, err)
				}
				if len(b) < 12 || !bytes.Equal(b[8:12], []byte{0, 0, 0, 1}) {
					t.Fatalf("%s, task %s/%d: a committable that is not the Iceberg sink's version 1: %.200q", in.Path, ts.Vertex, ts.Subtask, b)
				}
				var c struct {
					Checkpoint *int64 `json:"checkpoint"`
					Files      []struct {
						Path string `json:"path"`
					} `json:"files"`
				}
				if err := json.Unmarshal(b[12:], &c); err != nil || c.Checkpoint == nil {
					t.Fatalf("%s, task %s/%d: a committable that is not the Iceberg sink's (%v): %.200q", in.Path, ts.Vertex, ts.Subtask, err, b)
				}
				for _, f := range c.Files {
					if cp, ok := where[f.Path]; ok && cp != *c.Checkpoint {
						t.Fatalf("data file %s is in committables of checkpoints %d and %d", f.Path, cp, *c.Checkpoint)
					}
					where[f.Path] = *c.Checkpoint
					if files[*c.Checkpoint] == nil {
						files[*c.Checkpoint] = map[string]bool{}
					}
					files[*c.Checkpoint][f.Path] = true
				}
			}
		}
	}
	return files, snapshots
}

// icebergResolveRefs replaces the CLI's references to environment
// variables in a checkpoint's blob (internal/cli/secretref.go: DLE '0' is
// a DLE; DLE kind NAME DLE the variable's value, as it is (s), escaped as
// in a JSON string (j) or a Go quoted string (q)) with the values.
func icebergResolveRefs(b []byte, vars map[string]string) ([]byte, error) {
	const esc = 0x10
	if bytes.IndexByte(b, esc) < 0 {
		return b, nil
	}
	var out []byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, esc)
		if i < 0 {
			return append(out, b...), nil
		}
		out, b = append(out, b[:i]...), b[i+1:]
		if len(b) > 0 && b[0] == '0' {
			out, b = append(out, esc), b[1:]
			continue
		}
		end := bytes.IndexByte(b, esc)
		if len(b) < 2 || end < 1 {
			return nil, errors.New("a reference to a variable without its end")
		}
		kind, name := b[0], string(b[1:end])
		v, ok := vars[name]
		if !ok {
			return nil, fmt.Errorf("a reference to the unset variable %s", name)
		}
		switch kind {
		case 's':
		case 'j':
			j, _ := json.Marshal(v)
			v = string(j[1 : len(j)-1])
		case 'q':
			q := strconv.Quote(v)
			v = q[1 : len(q)-1]
		default:
			return nil, fmt.Errorf("a reference of kind %q", kind)
		}
		out, b = append(out, v...), b[end+1:]
	}
	return out, nil
}

// icebergStoredFiles lists the Parquet data files under the table
// location's data directory, in storage: a local directory (file:// or a
// path) or s3:// (props hold s3.endpoint and the keys). Paths are returned
// as PyIceberg spells them.
func icebergStoredFiles(t *testing.T, location string, props map[string]string) []string {
	t.Helper()
	var out []string
	if rest, ok := strings.CutPrefix(location, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		c := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(props["s3.endpoint"]), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(props["s3.access-key-id"], props["s3.secret-access-key"], "")})
		in := &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(strings.TrimSuffix(prefix, "/") + "/data/")}
		for range 100000 {
			page, err := c.ListObjectsV2(context.Background(), in)
			if err != nil {
				t.Fatalf("list %s: %v", location, err)
			}
			for _, o := range page.Contents {
				if k := aws.ToString(o.Key); strings.HasSuffix(k, ".parquet") {
					out = append(out, "s3://"+bucket+"/"+k)
				}
			}
			if !aws.ToBool(page.IsTruncated) {
				return out
			}
			in.ContinuationToken = page.NextContinuationToken
		}
		t.Fatalf("list %s: too many pages", location)
	}
	// a local location: /dir, file:///dir or file:/dir (Java's
	// spelling); the files are named with the location's spelling
	loc := strings.TrimSuffix(location, "/")
	dir := loc
	if u, err := url.Parse(loc); err == nil && u.Scheme == "file" {
		dir = u.Path
	}
	err := filepath.WalkDir(filepath.Join(dir, "data"), func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == filepath.Join(dir, "data") {
			return filepath.SkipAll
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			out = append(out, loc+strings.TrimPrefix(p, dir))
		}
		return err
	})
	if err != nil {
		t.Fatalf("list %s: %v", location, err)
	}
	return out
}

// icebergAuditResult sums up an audit.
type icebergAuditResult struct {
	checkpoints     int // completed checkpoints (and savepoints) read
	dataCheckpoints int // checkpoints whose committables carried data files
	appends         int // append snapshots of the sink
	late            int // of them, late files of a committed checkpoint
	replaces        int // compaction snapshots
	stored          int // data files in storage
	referenced      int // data files the current snapshot references
	replaced        int // data files a compaction replaced (still stored)
	orphans         int // data files in storage no snapshot ever added
}

// icebergAudit checks the table tbl (as PyIceberg read it) against the
// data files of the committables in the checkpoints in ckptDir and the
// data files in storage under the table's location (env: the runs'
// variables; props: the S3 endpoint and keys for an s3:// location):
//
//   - one append snapshot per checkpoint that carried data, recording that
//     checkpoint, and none for a checkpoint without data: the append
//     snapshots are exactly the data-carrying checkpoints (plus a snapshot
//     marked sluice.late-checkpoint-id for files of a checkpoint that
//     reached the committer after it was committed, counted apart);
//   - each append snapshot adds exactly files of its checkpoint, and
//     every file of every checkpoint is added once;
//   - a compaction adds files no checkpoint wrote and deletes files added
//     earlier and not deleted yet;
//   - the current snapshot references exactly the files added and not
//     deleted, and every one of them is in storage.
//
// Files in storage that no snapshot added are orphans: files of attempts
// whose checkpoint never completed, or of a compaction that failed. The
// sink leaves them (Iceberg's remove-orphan-files deletes them); they are
// counted, not failed on.
func icebergAudit(t *testing.T, tbl icebergTable, ckptDir string, env []string, props map[string]string) icebergAuditResult {
	t.Helper()
	var r icebergAuditResult
	cps, n := icebergCheckpointFiles(t, ckptDir, env)
	r.checkpoints = n
	if tbl.Location == "" {
		t.Fatal("PyIceberg did not report the table's location")
	}
	stored := icebergStoredFiles(t, tbl.Location, props)
	fileCP := map[string]int64{}
	for cp, cpFiles := range cps {
		if len(cpFiles) > 0 {
			r.dataCheckpoints++
		}
		for f := range cpFiles {
			fileCP[f] = cp
		}
	}
	added := map[string]int64{} // file → the snapshot that added it
	live := map[string]bool{}
	regular := map[int64]int{} // checkpoint → its append snapshots (not late)
	lateOf := map[int64]int{}
	for _, s := range tbl.Snapshots {
		if _, ok := s.Props["sluice.compacted-checkpoints"]; ok {
			r.replaces++
			for _, f := range s.Deleted {
				if !live[f] {
					t.Errorf("compaction snapshot %d deletes %s, which is not in the table", s.ID, f)
				}
				delete(live, f)
				r.replaced++
			}
			for _, f := range s.Added {
				if _, ok := fileCP[f]; ok {
					t.Errorf("compaction snapshot %d adds %s, a file of checkpoint %d", s.ID, f, fileCP[f])
				}
				if prev, ok := added[f]; ok {
					t.Errorf("data file %s added by snapshots %d and %d", f, prev, s.ID)
				}
				added[f], live[f] = s.ID, true
			}
			continue
		}
		if s.Operation != "append" {
			continue // icebergCheck reports it
		}
		r.appends++
		cp, err := strconv.ParseInt(s.Props["sluice.max-committed-checkpoint-id"], 10, 64)
		if l, ok := s.Props["sluice.late-checkpoint-id"]; ok {
			r.late++
			cp, err = strconv.ParseInt(l, 10, 64)
			lateOf[cp]++
		} else {
			regular[cp]++
		}
		if err != nil {
			t.Errorf("snapshot %d: no checkpoint id: %v", s.ID, s.Props)
			continue
		}
		if len(s.Deleted) > 0 {
			t.Errorf("append snapshot %d deletes %d files", s.ID, len(s.Deleted))
		}
		for _, f := range s.Added {
			if got, ok := fileCP[f]; !ok {
				t.Errorf("snapshot %d (checkpoint %d) adds %s, which no checkpoint's committables name", s.ID, cp, f)
			} else if got != cp {
				t.Errorf("snapshot %d (checkpoint %d) adds %s, a file of checkpoint %d", s.ID, cp, f, got)
			}
			if prev, ok := added[f]; ok {
				t.Errorf("data file %s added by snapshots %d and %d", f, prev, s.ID)
			}
			added[f], live[f] = s.ID, true
		}
	}
	for _, cp := range slices.Sorted(maps.Keys(cps)) {
		cpFiles := cps[cp]
		k := regular[cp]
		switch {
		case len(cpFiles) == 0 && k+lateOf[cp] > 0:
			t.Errorf("checkpoint %d carried no data but has %d snapshots", cp, k+lateOf[cp])
		case len(cpFiles) > 0 && k > 1:
			t.Errorf("checkpoint %d has %d append snapshots, want one", cp, k)
		case len(cpFiles) > 0 && k+lateOf[cp] == 0:
			t.Errorf("checkpoint %d carried %d data files but has no snapshot", cp, len(cpFiles))
		}
		var missing []string
		for f := range cpFiles {
			if _, ok := added[f]; !ok {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			t.Errorf("checkpoint %d: %d of its %d data files are in no snapshot, e.g. %s", cp, len(missing), len(cpFiles), missing[0])
		}
	}
	for cp, n := range regular {
		if _, ok := cps[cp]; !ok {
			t.Errorf("%d snapshots record checkpoint %d, which is not among the completed checkpoints", n, cp)
		}
	}
	if r.appends-r.late != r.dataCheckpoints-countOnlyLate(cps, regular, lateOf) {
		t.Errorf("%d append snapshots (%d of late files) for %d checkpoints that carried data", r.appends, r.late, r.dataCheckpoints)
	}
	current := map[string]bool{}
	for _, f := range tbl.Files {
		current[f] = true
	}
	r.referenced = len(current)
	if !maps.Equal(current, live) {
		t.Errorf("the current snapshot references %d data files; the snapshots added %d that were not deleted since", len(current), len(live))
	}
	inStorage := map[string]bool{}
	for _, f := range stored {
		inStorage[f] = true
	}
	r.stored = len(inStorage)
	for f := range current {
		if !inStorage[f] {
			t.Errorf("data file %s is referenced but not in storage", f)
		}
	}
	for f := range inStorage {
		if _, ok := added[f]; !ok {
			r.orphans++
		}
	}
	t.Logf("audit: %d completed checkpoints, %d carried data; %d append snapshots (%d of late files), %d compactions; "+
		"%d data files in storage: %d referenced now, %d replaced by compactions, %d orphans (written by attempts whose checkpoint never completed)",
		r.checkpoints, r.dataCheckpoints, r.appends, r.late, r.replaces, r.stored, r.referenced, r.replaced, r.orphans)
	return r
}

// countOnlyLate counts the data-carrying checkpoints whose files all came
// in late snapshots (no regular snapshot of their own).
func countOnlyLate(cps map[int64]map[string]bool, regular, lateOf map[int64]int) int {
	n := 0
	for cp, cpFiles := range cps {
		if len(cpFiles) > 0 && regular[cp] == 0 && lateOf[cp] > 0 {
			n++
		}
	}
	return n
}

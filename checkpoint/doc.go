// Package checkpoint stores checkpoints and savepoints: the state of every
// source enumerator and every subtask of a job at one checkpoint, plus
// metadata. It is the sluice counterpart of Flink's checkpoint storage and
// its _metadata file.
//
// A [Storage] saves [Snapshot]s, lists them ([Info]), loads the latest
// complete checkpoint for recovery and discards old ones. [Local] keeps them
// in a directory; [Memory] keeps them in memory for jobs without a checkpoint
// directory. [Load] and [ListDir] read snapshot directories directly (the
// CLI's `sluice checkpoints <dir>`, restoring from a savepoint path), and
// [SaveSavepoint] writes a self-contained savepoint directory.
//
// # Layout
//
// Local stores each snapshot in its own directory:
//
//	<dir>/chk-<id>/          a checkpoint
//	<dir>/savepoint-<id>/    a savepoint
//	    state                the state file (binary, below)
//	    _metadata            JSON metadata; its presence marks the snapshot complete
//
// Nothing inside a snapshot directory refers to anything outside it, and the
// state file is named relative to the directory, so a snapshot directory can
// be moved or renamed and still loads with Load.
//
// Everything Local and SaveSavepoint write is private to the owner:
// directories 0700, files 0600 (before the umask), since state holds source
// positions, file names and whatever operators keep. Directories they
// create are made durable by fsyncing their parents.
//
// # The _metadata file
//
// A JSON object:
//
//	{
//	  "formatVersion": 1,
//	  "id": 12,
//	  "kind": "checkpoint",            // or "savepoint"
//	  "job": "orders-to-files",
//	  "timestamp": "2025-01-02T03:04:05.123456789Z",
//	  "stateFile": "state",            // a plain file name inside the directory
//	  "stateSize": 10289152,           // bytes
//	  "stateCRC32C": 2197320512,       // CRC-32C (Castagnoli) of the whole state file
//	  "tasks": 1000                    // informational
//	}
//
// Unknown fields are ignored; a formatVersion other than 1 is rejected.
//
// # The state file, format version 1
//
// Integers are varints as in encoding/binary: "uvarint" is unsigned LEB128,
// "varint" is zig-zag encoded. Composite values are length-prefixed:
//
//	string   uvarint byte length, bytes
//	blob     uvarint 0 for nil, else byte length+1; bytes
//	count    uvarint 0 for a nil map or slice, else element count+1
//
// The file is:
//
//	"SLCK"                          magic, 4 bytes
//	version                         uint16 big-endian, 1
//	id                              varint
//	kind                            uvarint, 0 checkpoint, 1 savepoint
//	job                             string
//	timestamp                       varint Unix seconds, uvarint nanoseconds
//	enumerators                     count, then per entry in key order: string key, blob state
//	properties                      count, then per entry in key order: string key, string value
//	tasks                           count, then per task:
//	    vertex                      string
//	    subtask, parallelism        varint, varint
//	    parts                       count, then per part in name order:
//	        name                    string
//	        blobs                   count, then each blob
//	"KCLS"                          trailer, 4 bytes
//
// The header fields repeat the metadata, and Load checks that they agree.
// Writing and reading stream through bufio with one allocation per blob;
// blobs larger than the buffer go straight to and from the file. Before
// allocating, the reader checks every length and count against the bytes
// left in the file, so a corrupt file yields ErrCorrupt rather than a huge
// allocation. Because nil and empty are encoded apart, a snapshot round-trips
// exactly (Timestamp is loaded in UTC).
//
// # Atomicity
//
// Save writes the state file and fsyncs it, writes _metadata.tmp and fsyncs
// it, renames it to _metadata, and fsyncs the snapshot directory and its
// parent. The rename is the commit point: a directory without _metadata is
// incomplete. List, ListDir and Latest ignore incomplete directories, and the
// next Local.Save removes incomplete chk-<id> directories as garbage
// (incomplete savepoint directories are left to their writer: a savepoint
// may be written concurrently by another process). A Save that fails removes
// its directory, _metadata first, so no failed save is ever listed. Errors
// name the snapshot, the operation and the path, and wrap the OS error:
//
//	checkpoint 12: write /data/chk/chk-12/state: no space left on device
//
// errors.Is(err, syscall.ENOSPC) holds for that error.
//
// Removal (retention, Discard) deletes _metadata first and fsyncs the
// directory, so a crash midway leaves an incomplete directory, never a
// complete-looking one without its state.
//
// # Retention
//
// After each successful Save of a checkpoint, checkpoints beyond the newest n
// are removed ([Retain], default 3); the one just saved is always kept.
// Savepoints are never pruned.
//
// # Verification and fallback
//
// Load checks the format version of both files, the size and CRC-32C of the
// state file, the structure of the state, and that state and metadata agree.
// Any mismatch returns an error wrapping [ErrCorrupt] that names the file
// (plus [ErrUnsupportedVersion] for a version this build cannot read).
//
// Latest (and LoadLatest for a directory) loads the newest completed
// checkpoint and never falls back past it: the committables of a completed
// checkpoint may already be committed, and replaying from an older one
// writes that output again. A Local records the newest completed
// checkpoint in <dir>/_latest (replaced atomically after each Save of a
// checkpoint), so a checkpoint whose _metadata or directory was deleted
// still counts as completed. If the newest completed checkpoint cannot be
// loaded, Latest fails with a *DamagedError (wrapping ErrDamaged and the
// cause, ErrCorrupt or ErrNotFound) that names it and what is wrong;
// restoring an older one is the caller's explicit choice (Get or Load).
// Errors other than damage are returned as they are. Garbage collection
// leaves the recorded checkpoint's directory alone, and Discard of it moves
// the record to the next older checkpoint.
//
// # Job id and lock
//
// Local.SetJobID records the owning job's id in <dir>/_job (atomically);
// Local.JobID reads it back. Local.Lock takes an exclusive flock on
// <dir>/_lock and writes the pid into it; the kernel releases it when the
// process dies. The runtime holds it for the whole run of a job.
//
// # Concurrency
//
// Local and Memory are safe for concurrent use. Local serializes Save,
// Discard and Latest; List does not wait for them. One Local should own a
// directory; Lock enforces that across processes.
package checkpoint

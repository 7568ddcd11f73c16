// Package filesink is the exactly-once sink example: it writes lines into
// files of one directory, and a file becomes visible only once the
// checkpoint that prepared it completed. It is written against sluice's
// public API only, in 80 lines (filesink.go), and passes the connector
// conformance suite (see filesink_test.go and docs/connector-howto.md).
//
// A writer keeps the lines of the current checkpoint interval in memory.
// At checkpoint n it writes them into the hidden file
// ".part-<n>-<subtask>.txt" and fsyncs it; its name is the committable.
// After the checkpoint completed, the committer (the sink itself) renames
// it to "part-<n>-<subtask>.txt", the committed view; hidden files are
// never part of it. Committing a restored committable whose file was
// renamed before is a success. Names derive from (checkpoint, subtask), so
// a restarted writer finds what aborted attempts prepared after the
// restored checkpoint and removes it; subtask 0 also removes what the
// subtasks that a scale-down removed left behind.
package filesink

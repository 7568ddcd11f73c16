package file

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Names of the files a sink creates. Every name holds the job's id
// (sink.InitContext.JobID), so that jobs writing under one base directory
// never create, resume, clean up or compact each other's files:
//
//	part file      <prefix>-<job>-<subtask>-<counter><suffix>
//	in progress    .<part file>.inprogress
//	resumed        .<part file>.r<attempt>.inprogress
//	compacted      <prefix>-<job>-compacted-<checkpoint>-<n><suffix>
//	compacting     .<compacted>.compacting
//	manifest       .<compacted>.compact-manifest (and .tmp while written)
//
// Sinks before job ids named part files <prefix>-<subtask>-<counter><suffix>
// and compacted files <prefix>-compacted-<checkpoint>-<n><suffix>.
// Committables and writer states list their files by name, so such files
// are still committed and resumed after a restore; their strays and
// unfinished compactions are cleaned up when a restored state or
// committable shows that the job's files use the old names.

// A part file that was open at the checkpoint a writer restores is not
// reopened: the writer copies its checkpointed bytes into a new hidden
// file, named with a tag of the writer's attempt (8 random hex digits,
// different for every writer instance), and continues there. A stale
// writer that still has the old file open (a paused cluster leader,
// resumed before it noticed its successor: docs/cluster.md, "Zombie
// writes") can append to the old file only; no later checkpoint names it,
// and it is never committed. The old file stays, for another restore of
// the same checkpoint, until a restore of a later checkpoint removes it
// as a stray (see localDest.recover).

// partNames builds and parses the names of one job's files.
type partNames struct {
	prefix, suffix string
	job            string
}

// checkJobID reports a job id that cannot be part of a file name.
func checkJobID(id string) error {
	if id == "" {
		return fmt.Errorf("file sink: the job has no id (sink.InitContext.JobID is empty); part file names need it")
	}
	if containsAny(id, "/\\\x00") {
		return fmt.Errorf("file sink: job id %q contains a path separator or NUL; part file names need it", id)
	}
	return nil
}

// final is the visible name of the part file of subtask sub with counter c.
func (n partNames) final(sub int, c int64) string {
	return n.prefix + "-" + n.job + "-" + strconv.Itoa(sub) + "-" + strconv.FormatInt(c, 10) + n.suffix
}

// inProgress is the hidden name of a part file while it is written.
func inProgress(final string) string { return "." + final + ".inprogress" }

// attemptTagLen is the number of hex digits of an attempt tag.
const attemptTagLen = 8

// newAttemptTag returns a random attempt tag.
func newAttemptTag() string {
	var b [attemptTagLen / 2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// resumedName is the hidden name of the part file final resumed by the
// writer attempt tagged tag.
func resumedName(final, tag string) string { return "." + final + ".r" + tag + ".inprogress" }

// untagged returns a hidden in-progress name without its attempt tag
// (.<final>.r<tag>.inprogress → .<final>.inprogress); other names are
// returned as they are.
func untagged(name string) string {
	rest, ok := strings.CutSuffix(name, ".inprogress")
	if !ok {
		return name
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return name
	}
	t := rest[i+1:]
	if len(t) != 1+attemptTagLen || t[0] != 'r' {
		return name
	}
	for _, c := range []byte(t[1:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return name
		}
	}
	return rest[:i] + ".inprogress"
}

// finalOf is the final name of a hidden in-progress name (tagged or not),
// or "" if it is none.
func finalOf(hidden string) string {
	rest, ok := strings.CutSuffix(untagged(hidden), ".inprogress")
	if !ok {
		return ""
	}
	rest, ok = strings.CutPrefix(rest, ".")
	if !ok {
		return ""
	}
	return rest
}

// compacted is the name of the n-th file compacted at checkpoint id.
func (n partNames) compacted(id int64, i int) string {
	return n.compactedPrefix(n.job) + strconv.FormatInt(id, 10) + "-" + strconv.Itoa(i) + n.suffix
}

// compactedPrefix starts the names of job's compacted files ("" for the
// names from before job ids).
func (n partNames) compactedPrefix(job string) string {
	if job == "" {
		return n.prefix + "-compacted-"
	}
	return n.prefix + "-" + job + "-compacted-"
}

// parsePartName parses a hidden in-progress name
// .<prefix>-<job>-<subtask>-<counter><suffix>.inprogress, or
// .<prefix>-<subtask>-<counter><suffix>.inprogress from before job ids
// (job is then "").
func parsePartName(name, prefix, suffix string) (job string, sub int, counter int64, ok bool) {
	rest, ok := strings.CutPrefix(untagged(name), "."+prefix+"-")
	if !ok {
		return "", 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, suffix+".inprogress")
	if !ok {
		return "", 0, 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i < 0 {
		return "", 0, 0, false
	}
	c, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || !allDigits(rest[i+1:]) {
		return "", 0, 0, false
	}
	rest = rest[:i]
	a := rest
	if j := strings.LastIndexByte(rest, '-'); j >= 0 {
		job, a = rest[:j], rest[j+1:]
		if job == "" {
			return "", 0, 0, false
		}
	}
	s, err := strconv.Atoi(a)
	if err != nil || !allDigits(a) {
		return "", 0, 0, false
	}
	return job, s, c, true
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

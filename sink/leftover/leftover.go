package leftover

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Scheme formats and parses the names of one sink's prepared transactions:
// <Prefix><subtask>-<seq><Suffix>, subtask and seq in decimal without
// sign or leading '+'. The zero Scheme names them "<subtask>-<seq>".
type Scheme struct {
	// Prefix starts every name. It should identify the job and the sink
	// (for example "<prefix>-<job id>-"), so that no other job's names
	// parse.
	Prefix string
	// Suffix ends every name ("" for none).
	Suffix string
}

// Format returns the name of what subtask prepared with sequence number
// seq.
func (s Scheme) Format(subtask int, seq int64) string {
	return s.Prefix + strconv.Itoa(subtask) + "-" + strconv.FormatInt(seq, 10) + s.Suffix
}

// Parse returns the subtask and sequence number of a name made by Format.
// It reports false for a name with another prefix or suffix, and for one
// whose middle is not exactly two runs of decimal digits joined by '-'
// (so a name of a job whose id extends Prefix does not parse).
func (s Scheme) Parse(name string) (subtask int, seq int64, ok bool) {
	rest, ok := strings.CutPrefix(name, s.Prefix)
	if !ok {
		return 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, s.Suffix)
	if !ok {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(rest, "-")
	if !ok || !digits(a) || !digits(b) {
		return 0, 0, false
	}
	sub, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, false
	}
	n, err := strconv.ParseInt(b, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return sub, n, true
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Parser parses names into the subtask that prepared them and a sequence
// number. [Scheme] is one; a connector whose listed names carry more (a
// directory, say) wraps it.
type Parser interface {
	Parse(name string) (subtask int, seq int64, ok bool)
}

// State is what one restored writer state says about the names of the old
// writer that took it.
type State struct {
	// Subtask is the old writer's subtask.
	Subtask int
	// From is the first sequence number the old writer had not used when
	// it took the state: its names with a lower seq belong to the
	// checkpoint (committed, or committed by a restored committable, or
	// resumed), those at or above it were prepared after it. 0 when every
	// name of the old writer is a leftover once its pending transactions
	// are committed (a pool of transactional ids).
	From int64
}

// Request describes the writer that is starting and what it found.
type Request struct {
	// Parser parses the names in Existing; names it does not parse are
	// never aborted. Required.
	Parser Parser
	// Subtask and Parallelism are the starting writer's
	// (sink.InitContext.SubtaskIndex and Parallelism).
	Subtask, Parallelism int
	// Restored is set when the writer starts from a completed checkpoint
	// or savepoint.
	Restored bool
	// PreviousParallelism is the parallelism of the checkpoint restored
	// from, 0 when unknown (a writer learns it from the states it got).
	// Ignored unless Restored.
	PreviousParallelism int
	// States are the restored writer states that reached this writer.
	// Ignored when Checkpoint is set.
	States []State
	// Checkpoint is, for a scheme whose seq is the id of the checkpoint
	// a name was prepared at (Flink's Kafka sink, PostgreSQL gids
	// <prefix>-<subtask>-<checkpoint>), the id of the checkpoint restored
	// from. Then no state is needed: writer j % parallelism aborts old
	// subtask j's names with seq > Checkpoint (checkpoints never repeat,
	// so those were prepared after it); names with a seq up to it belong
	// to the checkpoint (list those its committables commit in Needed). 0 for
	// schemes of counters or pools, where States say where each old
	// writer's checkpointed names end. Ignored unless Restored.
	Checkpoint int64
	// Existing are the names that exist now, as listed by the connector.
	Existing []string
	// Needed are names that restored committables or writer states still
	// commit or resume: never aborted.
	Needed []string
}

// ErrInvalidRequest is wrapped by the errors of an impossible Request.
var ErrInvalidRequest = errors.New("leftover: invalid request")

func (r *Request) check() error {
	switch {
	case r.Parser == nil:
		return fmt.Errorf("%w: no Parser", ErrInvalidRequest)
	case r.Parallelism <= 0:
		return fmt.Errorf("%w: parallelism %d", ErrInvalidRequest, r.Parallelism)
	case r.Subtask < 0 || r.Subtask >= r.Parallelism:
		return fmt.Errorf("%w: subtask %d at parallelism %d", ErrInvalidRequest, r.Subtask, r.Parallelism)
	case r.PreviousParallelism < 0:
		return fmt.Errorf("%w: previous parallelism %d", ErrInvalidRequest, r.PreviousParallelism)
	case r.Checkpoint < 0:
		return fmt.Errorf("%w: checkpoint %d", ErrInvalidRequest, r.Checkpoint)
	}
	for _, st := range r.States {
		if st.Subtask < 0 || st.From < 0 {
			return fmt.Errorf("%w: state of subtask %d from %d", ErrInvalidRequest, st.Subtask, st.From)
		}
	}
	return nil
}

// Owns reports whether the writer r describes is the one that aborts a
// name of old subtask with sequence number seq, unless it is Needed (see
// the package doc for the rule). Connectors that cannot list their names
// ask it for the names they can compute, such as a pool of transactional
// ids. It is false for an invalid Request.
func (r Request) Owns(subtask int, seq int64) bool {
	return r.check() == nil && r.owns(subtask, seq)
}

func (r *Request) owns(subtask int, seq int64) bool {
	if subtask < 0 || seq < 0 {
		return false
	}
	if !r.Restored {
		return subtask%r.Parallelism == r.Subtask
	}
	if r.Checkpoint > 0 {
		return subtask%r.Parallelism == r.Subtask && seq > r.Checkpoint
	}
	from, held := int64(0), false
	for _, st := range r.States {
		if st.Subtask == subtask {
			// Several states of one old subtask: the highest From keeps
			// the most.
			from, held = max(from, st.From), true
		}
	}
	if held {
		return seq >= from
	}
	return r.PreviousParallelism > 0 && subtask >= r.PreviousParallelism && subtask%r.Parallelism == r.Subtask
}

// Subtasks returns, in increasing order, the old subtasks below
// max(PreviousParallelism, Parallelism) — and those of its States — with
// names this writer owns (every one from its State.From on, or every
// one). With Owns it
// lets a connector that cannot list its names abort the ones it can
// compute.
func (r Request) Subtasks() []int {
	if r.check() != nil {
		return nil
	}
	limit := max(r.PreviousParallelism, r.Parallelism)
	if r.Restored && r.Checkpoint == 0 {
		for _, st := range r.States {
			limit = max(limit, st.Subtask+1)
		}
	}
	var out []int
	for j := range limit {
		if r.ownsAny(j) {
			out = append(out, j)
		}
	}
	return out
}

func (r *Request) ownsAny(j int) bool {
	if !r.Restored || r.Checkpoint > 0 {
		return j%r.Parallelism == r.Subtask
	}
	for _, st := range r.States {
		if st.Subtask == j {
			return true
		}
	}
	return r.owns(j, 0)
}

// Abort returns the names of r.Existing that this writer must abort, in
// the order listed, each once: those that parse, that it owns (Owns) and
// that are not Needed.
func Abort(r Request) ([]string, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	needed := make(map[string]bool, len(r.Needed))
	for _, n := range r.Needed {
		needed[n] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, name := range r.Existing {
		if needed[name] || seen[name] {
			continue
		}
		sub, seq, ok := r.Parser.Parse(name)
		if !ok || !r.owns(sub, seq) {
			continue
		}
		seen[name] = true
		out = append(out, name)
	}
	return out, nil
}

package connectortest

import (
	"fmt"
	"slices"
	"strings"
)

// expectation says how output must relate to input.
type expectation struct {
	// exact: every record once (exactly-once); otherwise at least once.
	exact bool
	// ordered: each split's first occurrences in increasing position.
	ordered bool
}

func expect(g Guarantee, unordered bool) expectation {
	return expectation{exact: g == ExactlyOnce, ordered: g == ExactlyOnce && !unordered}
}

// compare checks got against want (want[i] holds split i's records in
// order). The error names the first missing record, the first duplicated
// and the first out-of-order one, with their split and position.
func compare(got []Record, want [][]Record, e expectation) error {
	wantByKey := map[key]string{}
	total := 0
	for _, rs := range want {
		for _, r := range rs {
			wantByKey[r.key()] = r.Payload
			total++
		}
	}
	seen := make(map[key]int, len(got))
	lastSeq := map[int]int64{}
	lastPos := map[int]int{}
	var problems []string
	var dups, unexpected, corrupt, disorder int
	for i, r := range got {
		k := r.key()
		p, ok := wantByKey[k]
		switch {
		case !ok:
			if unexpected == 0 {
				problems = append(problems, fmt.Sprintf("first unexpected record %q at output position %d (never written)", r.String(), i))
			}
			unexpected++
			continue
		case p != r.Payload:
			if corrupt == 0 {
				problems = append(problems, fmt.Sprintf("first corrupted record: split %d seq %d at output position %d has payload %q, want %q", r.Split, r.Seq, i, r.Payload, p))
			}
			corrupt++
		}
		if first, dup := seen[k]; dup {
			if dups == 0 {
				problems = append(problems, fmt.Sprintf("first duplicated record: split %d seq %d at output positions %d and %d", r.Split, r.Seq, first-1, i))
			}
			dups++
			continue
		}
		seen[k] = i + 1
		if last, ok := lastSeq[r.Split]; e.ordered && ok && r.Seq < last {
			if disorder == 0 {
				problems = append(problems, fmt.Sprintf("first out-of-order record: split %d seq %d at output position %d after seq %d at position %d", r.Split, r.Seq, i, last, lastPos[r.Split]))
			}
			disorder++
		}
		lastSeq[r.Split], lastPos[r.Split] = r.Seq, i
	}
	var missing int
	var firstMissing string
	for _, rs := range want {
		for _, r := range rs {
			if seen[r.key()] == 0 {
				if missing == 0 {
					firstMissing = fmt.Sprintf("first missing record: split %d seq %d", r.Split, r.Seq)
				}
				missing++
			}
		}
	}
	if firstMissing != "" {
		problems = slices.Insert(problems, 0, firstMissing)
	}
	if !e.exact {
		dups = 0 // allowed
		problems = slices.DeleteFunc(problems, func(s string) bool { return strings.HasPrefix(s, "first duplicated") })
	}
	if missing+dups+unexpected+corrupt+disorder == 0 {
		return nil
	}
	return fmt.Errorf("%s: got %d records, want %d: %d missing, %d duplicated, %d unexpected, %d corrupted, %d out of order; %s",
		e, len(got), total, missing, dups, unexpected, corrupt, disorder, strings.Join(problems, "; "))
}

func (e expectation) String() string {
	if e.exact {
		return "output must equal input"
	}
	return "output must contain input"
}

// count returns the number of records in want.
func count(want [][]Record) int {
	n := 0
	for _, rs := range want {
		n += len(rs)
	}
	return n
}

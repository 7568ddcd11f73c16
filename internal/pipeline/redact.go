package pipeline

import (
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// MinRedactLen is the length below which a value from the environment is
// not hidden, unless it is a secret option: hiding "1" or "eu" would
// garble every line (numbers, durations, words) and such a value is no
// secret worth keeping. Tokens and passwords (Option.Secret) are hidden
// whatever their length.
const MinRedactLen = 4

// Redactor replaces the values a pipeline took from the environment by
// their ${VAR} names (and secret options written in the file by ***) in text: log lines, errors, HTTP responses. It also
// catches the values as they appear quoted by the text and JSON log
// handlers and Prometheus labels (escaped quotes and backslashes). It is
// safe for concurrent use; a nil *Redactor changes nothing.
type Redactor struct {
	r *strings.Replacer
}

// NewRedactor returns a Redactor for subs (nil if nothing needs hiding).
func NewRedactor(subs []Substitution) *Redactor {
	type pair struct{ old, new string }
	var pairs []pair
	seen := map[string]bool{}
	for _, s := range subs {
		if s.Value == "" || len(s.Value) < MinRedactLen && !s.Secret {
			continue
		}
		repl := "${" + s.Var + "}"
		if s.Var == "" {
			repl = "***"
		}
		q := strconv.Quote(s.Value)
		j, _ := json.Marshal(s.Value)
		for _, v := range []string{s.Value, q[1 : len(q)-1], string(j[1 : len(j)-1])} {
			if !seen[v] {
				seen[v] = true
				pairs = append(pairs, pair{v, repl})
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// Longest first: at one position the first matching pair wins, so a
	// value that contains another is replaced whole.
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.old) - len(a.old) })
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.old, p.new)
	}
	return &Redactor{r: strings.NewReplacer(args...)}
}

// String returns s with every value replaced.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Bytes returns b with every value replaced.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	return []byte(r.r.Replace(string(b)))
}

// Writer returns a writer that redacts each Write before passing it to w.
// A value is found only within one Write: the slog handlers write one
// record per call and fmt.Fprint* one message per call, which is how the
// CLI writes. Its Write reports len(p) on success. With a nil Redactor it
// returns w.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	if r == nil {
		return w
	}
	return &redactWriter{r: r, w: w}
}

type redactWriter struct {
	r  *Redactor
	mu sync.Mutex
	w  io.Writer
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	out := p
	if rw.r.r != nil {
		out = rw.r.Bytes(p)
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if _, err := rw.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the underlying writer (to detect a terminal).
func (rw *redactWriter) Unwrap() io.Writer { return rw.w }

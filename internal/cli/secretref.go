package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/sluice-io/sluice/internal/pipeline"
)

// Secrets never reach a checkpoint: before a snapshot is stored, every
// occurrence of a value that came from the environment (${VAR}) in any of
// its strings and state blobs is replaced by a reference to the variable,
// and after it is loaded the references are replaced by the variable's
// value again. The encoding is a reversible byte-level escape, so it is
// exact whatever the inner format of a blob (binary, JSON): the bytes that
// come back are the bytes that went in.
//
// In an encoded byte string, refEscape (DLE, 0x10) starts an escape:
//
//	ESC '0'                 a literal ESC byte
//	ESC kind NAME ESC       a value of the variable NAME, in the form kind:
//	                        's' as it is, 'j' escaped as inside a JSON
//	                        string, 'q' escaped as inside a Go quoted string
//
// Every other byte stands for itself. Variable names ([A-Za-z_][A-Za-z0-9_]*)
// never contain ESC, so a reference ends at the next ESC. DLE is a control
// character: it never appears raw in JSON or in text, so text and JSON state
// grows only where a secret was, and a job name stays valid UTF-8.
const refEscape = 0x10

// Reference kinds: the form in which a value appears.
const (
	refLiteral = '0'
	refRaw     = 's'
	refJSON    = 'j'
	refQuoted  = 'q'
)

// secretForm renders v in the form kind.
func secretForm(v string, kind byte) (string, bool) {
	switch kind {
	case refRaw:
		return v, true
	case refJSON:
		j, _ := json.Marshal(v)
		return string(j[1 : len(j)-1]), true
	case refQuoted:
		q := strconv.Quote(v)
		return q[1 : len(q)-1], true
	}
	return "", false
}

// secretCodec encodes and decodes references to a set of variables.
type secretCodec struct {
	// pats are the byte strings replaced, longest first; at one position
	// the first that matches wins, so a value that contains another is
	// replaced whole.
	pats []refPattern
	// first[b] says whether some pattern starts with byte b.
	first [256]bool
}

type refPattern struct {
	val  []byte // the bytes replaced
	ref  string // the reference that replaces them
	name string
}

// newSecretCodec returns a codec for vals (variable name → value). Empty
// values are ignored. Two variables with the same value are referred to by
// the name that sorts first.
func newSecretCodec(vals map[string]string) *secretCodec {
	c := &secretCodec{}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	for _, n := range names {
		v := vals[n]
		if v == "" {
			continue
		}
		for _, kind := range []byte{refRaw, refJSON, refQuoted} {
			f, _ := secretForm(v, kind)
			if seen[f] {
				continue
			}
			seen[f] = true
			c.pats = append(c.pats, refPattern{val: []byte(f), ref: string([]byte{refEscape, kind}) + n + string([]byte{refEscape}), name: n})
			c.first[f[0]] = true
		}
	}
	slices.SortStableFunc(c.pats, func(a, b refPattern) int { return cmp.Compare(len(b.val), len(a.val)) })
	c.first[refEscape] = true
	return c
}

// secretVars returns the variables whose values the CLI keeps out of
// checkpoints: those it hides in logs (pipeline.NewRedactor's rule). A
// secret option written in the pipeline file itself (no variable) is
// not referred to: the file holds it anyway.
func secretVars(subs []pipeline.Substitution) map[string]string {
	vals := map[string]string{}
	for _, s := range subs {
		if s.Var == "" || s.Value == "" || len(s.Value) < pipeline.MinRedactLen && !s.Secret {
			continue
		}
		vals[s.Var] = s.Value
	}
	return vals
}

// encode returns b with every literal ESC escaped and every value replaced
// by its reference. nil stays nil and empty stays empty.
func (c *secretCodec) encode(b []byte) []byte {
	if b == nil {
		return nil
	}
	i := c.next(b, 0)
	if i == len(b) {
		return bytes.Clone(b)
	}
	out := make([]byte, 0, len(b)+16)
	start := 0
	for i < len(b) {
		if b[i] == refEscape {
			out = append(out, b[start:i]...)
			out = append(out, refEscape, refLiteral)
			i++
			start = i
		} else if p := c.match(b[i:]); p != nil {
			out = append(out, b[start:i]...)
			out = append(out, p.ref...)
			i += len(p.val)
			start = i
		} else {
			i++
		}
		i = c.next(b, i)
	}
	return append(out, b[start:]...)
}

// next returns the first index from i at which ESC or a pattern may start.
func (c *secretCodec) next(b []byte, i int) int {
	for i < len(b) && !c.first[b[i]] {
		i++
	}
	return i
}

func (c *secretCodec) match(b []byte) *refPattern {
	for k := range c.pats {
		if bytes.HasPrefix(b, c.pats[k].val) {
			return &c.pats[k]
		}
	}
	return nil
}

// errBadReference is wrapped by errors about an encoded string that is not
// well formed.
var errBadReference = errors.New("malformed secret reference")

// unsetVarError reports a reference to a variable that is not set.
type unsetVarError struct{ name string }

func (e *unsetVarError) Error() string {
	return fmt.Sprintf("the snapshot refers to environment variable %s, which is not set (set it to the value it had when the snapshot was taken)", e.name)
}

// decodeRefs reverses encode: lookup gives the value of a variable. It
// fails with an *unsetVarError naming a variable lookup does not know, or
// errBadReference.
func decodeRefs(b []byte, lookup func(name string) (string, bool)) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	i := bytes.IndexByte(b, refEscape)
	if i < 0 {
		return bytes.Clone(b), nil
	}
	out := make([]byte, 0, len(b))
	for i >= 0 {
		out = append(out, b[:i]...)
		b = b[i:]
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: escape at the end", errBadReference)
		}
		kind := b[1]
		if kind == refLiteral {
			out = append(out, refEscape)
			b = b[2:]
		} else {
			end := bytes.IndexByte(b[2:], refEscape)
			if end < 0 {
				return nil, fmt.Errorf("%w: unterminated reference", errBadReference)
			}
			name := string(b[2 : 2+end])
			if _, ok := secretForm("", kind); !ok || name == "" {
				return nil, fmt.Errorf("%w: reference kind %q", errBadReference, kind)
			}
			v, ok := lookup(name)
			if !ok {
				return nil, &unsetVarError{name}
			}
			f, _ := secretForm(v, kind)
			out = append(out, f...)
			b = b[2+end+1:]
		}
		i = bytes.IndexByte(b, refEscape)
	}
	return append(out, b...), nil
}

// displayRefs renders references as ${NAME} for a listing, without
// looking values up.
func displayRefs(s string) string {
	if !bytes.Contains([]byte(s), []byte{refEscape}) {
		return s
	}
	out, err := decodeRefs([]byte(s), func(name string) (string, bool) { return "${" + name + "}", true })
	if err != nil {
		return strconv.Quote(s)
	}
	// The JSON and quoted forms of "${NAME}" are "${NAME}" too.
	return string(out)
}

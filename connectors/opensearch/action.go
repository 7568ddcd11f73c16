package opensearch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Op is a bulk operation.
type Op int

const (
	// Index writes the document, replacing one with the same id.
	Index Op = iota
	// Create writes the document only if no document has its id. With an
	// id, a replayed create that finds its document already there
	// (version conflict) counts as written: that is what makes it
	// exactly-once.
	Create
	// Update merges Doc into the document with the id, creating it from
	// Doc when there is none (doc_as_upsert). It needs an id.
	Update
	// Delete removes the document with the id; deleting a missing
	// document is a success. It needs an id and has no Doc.
	Delete
)

func (o Op) String() string {
	switch o {
	case Index:
		return "index"
	case Create:
		return "create"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Action is one bulk action: what the sink's document function makes of
// a record.
type Action struct {
	// Op is the operation (default Index).
	Op Op
	// Index is the target index (or alias, or data stream). Required;
	// see [IndexPattern] for names with event-time dates.
	Index string
	// ID is the document id. Required for Update and Delete, and for
	// every operation under [ExactlyOnce]: a replay after a failure then
	// rewrites the same documents. Empty: OpenSearch generates one
	// (Index and Create under [AtLeastOnce] only; a replay writes the
	// record again under a new id).
	ID string
	// Routing is the shard routing value (default: none, routing by id).
	Routing string
	// Pipeline is the ingest pipeline (Index and Create only; default
	// none).
	Pipeline string
	// Doc is the document as JSON (an object): the source for Index and
	// Create, the partial document for Update. Pretty-printed JSON is
	// compacted. Must be empty for Delete.
	Doc []byte
	// Version, with ExternalVersion set, is the document's external
	// version (version_type=external, Index and Delete only): OpenSearch
	// keeps a document only if its version is higher than the stored
	// one, so a replayed older version never overwrites a newer document
	// (the conflict counts as written). Use a number that grows with the
	// record, such as the Kafka offset.
	Version         int64
	ExternalVersion bool
}

// validate checks what can be checked without the server; errors name
// the action. checkIndex: also check the index name.
func (a *Action) validate(exactlyOnce, checkIndex bool) error {
	if a.Op < Index || a.Op > Delete {
		return fmt.Errorf("unknown operation %v; allowed: Index, Create, Update, Delete", a.Op)
	}
	if checkIndex {
		if err := ValidIndexName(a.Index); err != nil {
			return err
		}
	}
	if a.ID == "" {
		switch {
		case a.Op == Update || a.Op == Delete:
			return fmt.Errorf("%v into index %q without an id: %v needs a document id", a.Op, a.Index, a.Op)
		case exactlyOnce:
			return fmt.Errorf("%v into index %q without an id: exactly-once needs a deterministic document id (auto-generated ids are at-least-once only: a replay would write the record again under a new id)", a.Op, a.Index)
		}
	}
	if len(a.ID) > 512 {
		return fmt.Errorf("document id in index %q is %d bytes; OpenSearch allows at most 512", a.Index, len(a.ID))
	}
	switch a.Op {
	case Delete:
		if len(a.Doc) > 0 {
			return fmt.Errorf("delete of id %q in index %q has a document; delete takes none", a.ID, a.Index)
		}
	default:
		if len(bytes.TrimSpace(a.Doc)) == 0 {
			return fmt.Errorf("%v of id %q into index %q has no document", a.Op, a.ID, a.Index)
		}
	}
	if a.Pipeline != "" && (a.Op == Update || a.Op == Delete) {
		return fmt.Errorf("%v of id %q in index %q has a pipeline; pipelines apply to index and create only", a.Op, a.ID, a.Index)
	}
	if a.ExternalVersion {
		if a.Op != Index && a.Op != Delete {
			return fmt.Errorf("%v of id %q in index %q has an external version; external versioning applies to index and delete only", a.Op, a.ID, a.Index)
		}
		if a.ID == "" {
			return fmt.Errorf("%v into index %q has an external version but no id", a.Op, a.Index)
		}
		if a.Version < 0 {
			return fmt.Errorf("%v of id %q in index %q has external version %d; must be >= 0", a.Op, a.ID, a.Index, a.Version)
		}
	}
	return nil
}

// appendTo appends the action's bulk lines (NDJSON) to b.
func (a *Action) appendTo(b []byte) ([]byte, error) {
	b = append(b, `{"`...)
	b = append(b, a.Op.String()...)
	b = append(b, `":{"_index":`...)
	b = appendString(b, a.Index)
	if a.ID != "" {
		b = append(b, `,"_id":`...)
		b = appendString(b, a.ID)
	}
	if a.Routing != "" {
		b = append(b, `,"routing":`...)
		b = appendString(b, a.Routing)
	}
	if a.Pipeline != "" {
		b = append(b, `,"pipeline":`...)
		b = appendString(b, a.Pipeline)
	}
	if a.ExternalVersion {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, a.Version, 10)
		b = append(b, `,"version_type":"external"`...)
	}
	b = append(b, "}}\n"...)
	switch a.Op {
	case Delete:
		return b, nil
	case Update:
		b = append(b, `{"doc":`...)
		var err error
		if b, err = appendDoc(b, a.Doc); err != nil {
			return b, err
		}
		b = append(b, `,"doc_as_upsert":true}`...)
	default:
		var err error
		if b, err = appendDoc(b, a.Doc); err != nil {
			return b, err
		}
	}
	return append(b, '\n'), nil
}

// appendDoc appends doc on one line: JSON with newlines (pretty-printed)
// is compacted, since a newline ends a bulk line.
func appendDoc(b, doc []byte) ([]byte, error) {
	doc = bytes.TrimSpace(doc)
	if bytes.IndexByte(doc, '\n') < 0 && bytes.IndexByte(doc, '\r') < 0 {
		return append(b, doc...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, doc); err != nil {
		return b, fmt.Errorf("document is not valid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ValidIndexName reports whether name is a valid OpenSearch index name
// (lowercase; none of \ / * ? " < > | , # : or space; not starting with
// - _ +; not . or ..; at most 255 bytes), with an error naming it.
func ValidIndexName(name string) error {
	bad := func(why string) error { return fmt.Errorf("index name %q is invalid: %s", name, why) }
	switch {
	case name == "":
		return fmt.Errorf("index name is empty")
	case name == "." || name == "..":
		return bad("must not be . or ..")
	case len(name) > 255:
		return bad("longer than 255 bytes")
	case strings.ContainsAny(name[:1], "-_+"):
		return bad("must not start with -, _ or +")
	case strings.ContainsAny(name, "\\/*?\"<>|,# :"):
		return bad(`must not contain \ / * ? " < > | , # : or space`)
	case strings.ToLower(name) != name:
		return bad("must be lowercase")
	}
	return nil
}

// IndexPattern is an index name with event-time date parts in braces, as
// Logstash and Flink's Elasticsearch sink write them: "logs-{yyyy.MM.dd}"
// becomes "logs-2026.12.01" for a record of that day (UTC). Inside braces:
// yyyy (year), yy (two-digit year), MM (month), dd (day), HH (hour), mm
// (minute), ss (second), ww (ISO week) and the separators . - _; text
// outside braces is copied.
type IndexPattern struct {
	parts []patternPart
}

type patternPart struct {
	lit   string
	field string // "" for a literal
}

// ParseIndexPattern compiles a pattern; the error names the pattern and
// what is wrong with it.
func ParseIndexPattern(pattern string) (IndexPattern, error) {
	var p IndexPattern
	rest := pattern
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return IndexPattern{}, fmt.Errorf("index pattern %q: } without {", pattern)
			}
			p.parts = append(p.parts, patternPart{lit: rest})
			break
		}
		if strings.IndexByte(rest[:open], '}') >= 0 {
			return IndexPattern{}, fmt.Errorf("index pattern %q: } without {", pattern)
		}
		if open > 0 {
			p.parts = append(p.parts, patternPart{lit: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return IndexPattern{}, fmt.Errorf("index pattern %q: { without }", pattern)
		}
		inner := rest[open+1 : open+end]
		if inner == "" {
			return IndexPattern{}, fmt.Errorf("index pattern %q: empty {}", pattern)
		}
		for i := 0; i < len(inner); {
			j := i
			for j < len(inner) && inner[j] == inner[i] {
				j++
			}
			tok := inner[i:j]
			switch tok {
			case "yyyy", "yy", "MM", "dd", "HH", "mm", "ss", "ww":
				p.parts = append(p.parts, patternPart{field: tok})
			default:
				if strings.Trim(tok, ".-_") != "" {
					return IndexPattern{}, fmt.Errorf("index pattern %q: unknown date part %q; allowed: yyyy yy MM dd HH mm ss ww and . - _", pattern, tok)
				}
				p.parts = append(p.parts, patternPart{lit: tok})
			}
			i = j
		}
		rest = rest[open+end+1:]
	}
	// The literal parts alone must make a valid name when dates are digits.
	probe := p.Format(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	if err := ValidIndexName(probe); err != nil {
		return IndexPattern{}, fmt.Errorf("index pattern %q: %w", pattern, err)
	}
	return p, nil
}

// Format returns the index name for event time t (in UTC).
func (p IndexPattern) Format(t time.Time) string {
	t = t.UTC()
	var b []byte
	for _, part := range p.parts {
		switch part.field {
		case "":
			b = append(b, part.lit...)
		case "yyyy":
			b = appendPadded(b, t.Year(), 4)
		case "yy":
			b = appendPadded(b, t.Year()%100, 2)
		case "MM":
			b = appendPadded(b, int(t.Month()), 2)
		case "dd":
			b = appendPadded(b, t.Day(), 2)
		case "HH":
			b = appendPadded(b, t.Hour(), 2)
		case "mm":
			b = appendPadded(b, t.Minute(), 2)
		case "ss":
			b = appendPadded(b, t.Second(), 2)
		case "ww":
			_, w := t.ISOWeek()
			b = appendPadded(b, w, 2)
		}
	}
	return string(b)
}

// FormatMillis returns the index name for an event time in milliseconds
// since the epoch (sink.Meta.Timestamp).
func (p IndexPattern) FormatMillis(ms int64) string { return p.Format(time.UnixMilli(ms)) }

func appendPadded(b []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

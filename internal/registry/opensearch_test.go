package registry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/opensearch"
	"github.com/sluice-io/sluice/internal/format"
)

// TestOpenSearchSinkOptionErrors: option rules are reported at the
// option they are about.
func TestOpenSearchSinkOptionErrors(t *testing.T) {
	for _, c := range []struct {
		opts     map[string]any
		opt, msg string
	}{
		{map[string]any{"action": "index"}, "index", "missing"},
		{map[string]any{"index": "a", "index-expr": `"b"`, "action": "index"}, "index-expr", "not both"},
		{map[string]any{"index": "a-{yyyy.MM.dd", "action": "index"}, "index", "{ without }"},
		{map[string]any{"index": "a-{ts|qq}", "action": "index"}, "index", "qq"},
		{map[string]any{"index": "Upper", "action": "index"}, "index", "lowercase"},
		{map[string]any{"index": "a", "id": "id +", "action": "index"}, "id", "unexpected"},
		{map[string]any{"index": "a", "action": "update"}, "id", "action update needs an id"},
		{map[string]any{"index": "a", "action": "delete"}, "id", "action delete needs an id"},
		{map[string]any{"index": "a", "id": "id", "version": "v", "action": "create"}, "version", "not create"},
		{map[string]any{"index": "a", "id": "id", "pipeline": "p", "action": "update"}, "pipeline", "not update"},
	} {
		err := validateOSSink(NewOptions(c.opts))
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.opt || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: got %v, want an error at %s containing %q", c.opts, err, c.opt, c.msg)
		}
	}
	if err := checkByteSize("5xb"); err == nil {
		t.Error("5xb accepted")
	}
	for s, want := range map[string]int{"5mb": 5 << 20, "512KB": 512 << 10, "100": 100, "7 b": 7} {
		if n, err := parseByteSize(s); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", s, n, err, want)
		}
	}
	if err := validateOSConn(NewOptions(map[string]any{"hosts": []string{"127.0.0.1:9200"}})); err == nil {
		t.Error("a host without scheme accepted")
	}
	if err := validateOSConn(NewOptions(map[string]any{"hosts": []string{"http://h:1"}, "api-key": "k", "username": "u"})); err == nil {
		t.Error("api-key with username accepted")
	}
}

// TestOpenSearchActions: the action the sink makes of a record: index
// patterns from meta.timestamp and from fields, id, routing, version and
// the document (JSON bytes passed through unchanged).
func TestOpenSearchActions(t *testing.T) {
	jc, err := format.Builtin().New("json", format.Config{})
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte(`{"id": 7, "region":"eu", "ts": 1700000000000, "when": "2024-02-29T10:00:00Z"}`)
	rec := RawRecord(raw, &Codecs{Value: jc}).WithTimestamp(time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		opts      map[string]any
		index, id string
		doc       string
	}{
		{map[string]any{"index": "logs-{yyyy.MM.dd}", "id": "string(id)", "action": "index"}, "logs-2025.12.31", "7", string(raw)},
		{map[string]any{"index": "logs-{ts|yyyy-MM}-{region}", "id": "id", "action": "index"}, "logs-2023-11-eu", "7", string(raw)},
		{map[string]any{"index": "w-{when|yyyy.MM.dd}", "id": `region + "-" + string(id)`, "action": "index"}, "w-2024.02.29", "eu-7", string(raw)},
		{map[string]any{"index-expr": `"by-" + region`, "id": "id", "action": "delete"}, "by-eu", "7", ""},
	} {
		s, err := compileOSSink(NewOptions(c.opts))
		if err != nil {
			t.Fatalf("%v: %v", c.opts, err)
		}
		a, opt, err := s.action(rec)
		if err != nil {
			t.Fatalf("%v: option %s: %v", c.opts, opt, err)
		}
		if a.Index != c.index || a.ID != c.id || string(a.Doc) != c.doc {
			t.Errorf("%v: index %q id %q doc %s; want %q %q %s", c.opts, a.Index, a.ID, a.Doc, c.index, c.id, c.doc)
		}
	}

	s, err := compileOSSink(NewOptions(map[string]any{"index": "a", "id": "id", "routing": "region", "version": "ts", "action": "index"}))
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := s.action(NewRecord(map[string]any{"id": int64(1), "region": "eu", "ts": int64(42), "x": "y"}))
	if err != nil || a.Routing != "eu" || !a.ExternalVersion || a.Version != 42 || a.Op != opensearch.Index || string(a.Doc) != `{"id":1,"region":"eu","ts":42,"x":"y"}` {
		t.Fatalf("%+v %s, %v", a, a.Doc, err)
	}
	for _, c := range []struct {
		opts     map[string]any
		rec      map[string]any
		opt, msg string
	}{
		{map[string]any{"index": "a", "id": "id", "action": "index"}, map[string]any{"id": 1.5}, "id", "want a string or an integer"},
		{map[string]any{"index": "a", "id": "id", "action": "index"}, map[string]any{"id": ""}, "id", "empty id"},
		{map[string]any{"index": "a-{ts|yyyy}", "id": "id", "action": "index"}, map[string]any{"id": "1"}, "index", `no field "ts"`},
		{map[string]any{"index": "a-{yyyy}", "id": "id", "action": "index"}, map[string]any{"id": "1"}, "index", "no meta.timestamp"},
		{map[string]any{"index-expr": `"A"`, "id": "id", "action": "index"}, map[string]any{"id": "1"}, "index-expr", "lowercase"},
		{map[string]any{"index": "a", "id": "id", "version": "v", "action": "index"}, map[string]any{"id": "1", "v": int64(-1)}, "version", "want an integer from 0"},
	} {
		s, err := compileOSSink(NewOptions(c.opts))
		if err != nil {
			t.Fatal(err)
		}
		_, opt, err := s.action(NewRecord(c.rec))
		if err == nil || opt != c.opt || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v on %v: option %q error %v; want %s: %q", c.opts, c.rec, opt, err, c.opt, c.msg)
		}
	}
}

package registry

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/postgres"
)

// pgSrcOpts returns m with url and table when m lacks them and the
// source's defaults, as a pipeline file's options get them (not IsSet).
func pgSrcOpts(m map[string]any) Options {
	base := map[string]any{"url": "postgres://u:pw@127.0.0.1:5432/db", "table": "t"}
	maps.Copy(base, m)
	return NewOptions(base).WithDefaults(postgresSourceOptions)
}

// TestPostgresSourceValidate: cdc-only options set in snapshot mode, a
// server-name without the Debezium envelope, both password options and a
// url that does not parse are refused at the option they name; the
// defaults pass in both modes.
func TestPostgresSourceValidate(t *testing.T) {
	for _, c := range []struct {
		opts       map[string]any
		option, in string
	}{
		{map[string]any{"slot": "s"}, "slot", "only with mode: cdc"},
		{map[string]any{"create-slot": true}, "create-slot", "only with mode: cdc"},
		{map[string]any{"status-interval": time.Second}, "status-interval", "only with mode: cdc"},
		{map[string]any{"chunk-wait-warning": 5 * time.Minute}, "chunk-wait-warning", "only with mode: cdc"},
		{map[string]any{"mode": "cdc", "server-name": "x"}, "server-name", "only with envelope: debezium"},
		{map[string]any{"password": "x", "password-file": "/p"}, "password-file", "password is set too"},
		{map[string]any{"url": "postgres://u:Secr3tPw@h:notaport/db"}, "url", "value not shown"},
	} {
		err := validatePostgresSource(pgSrcOpts(c.opts))
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(err.Error(), c.in) {
			t.Errorf("%v: error %v; want one at option %s naming %q", c.opts, err, c.option, c.in)
		}
	}
	// A cdc-only option set to its default passes in snapshot mode (one
	// file for both modes: create-slot: ${CREATE_SLOT:-false}).
	for _, m := range []map[string]any{{}, {"create-slot": false, "status-interval": 10 * time.Second, "slot": ""}, {"mode": "cdc", "slot": "s", "create-slot": true, "envelope": "debezium", "server-name": "x", "chunk-wait-warning": 5 * time.Minute}} {
		if err := validatePostgresSource(pgSrcOpts(m)); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
	for _, bad := range []string{"Upper", "with-dash", strings.Repeat("x", 64)} {
		if checkSlotName(bad) == nil {
			t.Errorf("slot name %q accepted", bad)
		}
	}
}

// TestPostgresChangeValue: the plain envelope's fields.
func TestPostgresChangeValue(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 30, 0, 0, time.UTC)
	v := PostgresChangeValue(postgres.Change{Op: postgres.OpUpdate, Table: "public.t", Key: []any{int64(1), "a"},
		Before: map[string]any{"v": int64(1)}, After: map[string]any{"v": int64(2)}, LSN: 42, CommitTime: at, Xid: 7})
	if v["op"] != "u" || v["table"] != "public.t" || v["lsn"] != int64(42) || v["commit_time"] != at || v["xid"] != int64(7) ||
		v["before"].(map[string]any)["v"] != int64(1) || v["after"].(map[string]any)["v"] != int64(2) || len(v["key"].([]any)) != 2 {
		t.Errorf("update: %v", v)
	}
	r := PostgresChangeValue(postgres.Change{Op: postgres.OpRead, Table: "public.t", Key: int64(1), After: map[string]any{"v": int64(0)}})
	if r["op"] != "r" || r["before"] != nil || r["commit_time"] != nil || r["lsn"] != int64(0) {
		t.Errorf("snapshot row: %v", r)
	}
}

// TestPostgresChunkWaitWarningOption: chunk-wait-warning is a duration,
// 1m by default (the library's ChunkWaitWarning default), greater than 0.
func TestPostgresChunkWaitWarningOption(t *testing.T) {
	var opt Option
	for _, o := range postgresSourceOptions {
		if o.Name == "chunk-wait-warning" {
			opt = o
		}
	}
	if opt.Type != Duration || opt.Default != time.Minute {
		t.Fatalf("chunk-wait-warning: %s, default %v; want a duration, 1m", opt.Type, opt.Default)
	}
	for _, c := range []struct {
		v  time.Duration
		ok bool
	}{{0, false}, {-time.Second, false}, {time.Millisecond, true}, {time.Hour, true}} {
		if err := opt.Check(c.v); (err == nil) != c.ok {
			t.Errorf("chunk-wait-warning %v: error %v, want accepted: %v", c.v, err, c.ok)
		}
	}
	if got := pgSrcOpts(map[string]any{"mode": "cdc"}).Duration("chunk-wait-warning"); got != time.Minute {
		t.Errorf("default: %v, want 1m", got)
	}
}

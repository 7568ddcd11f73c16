package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func pgOpts(m map[string]any) Options {
	base := map[string]any{"url": "postgres://u:pw@127.0.0.1:5432/db", "password": "", "password-file": "", "table": "t",
		"columns": []string{}, "mode": "append", "key": []string{}, "batch-size": int64(1000), "transaction-prefix": ""}
	for k, v := range m {
		base[k] = v
	}
	return NewOptions(base)
}

// TestPostgresValidate: rules across the sink's options are reported at
// the option they name, and a url that does not parse is refused without
// its value.
func TestPostgresValidate(t *testing.T) {
	for _, c := range []struct {
		opts       map[string]any
		option, in string
	}{
		{map[string]any{"key": []string{"id"}}, "key", "only with mode: upsert"},
		{map[string]any{"mode": "upsert", "key": []string{"id"}, "columns": []string{"k", "v"}}, "key", `"id" is not among columns`},
		{map[string]any{"password": "x", "password-file": "/p"}, "password-file", "password is set too"},
		{map[string]any{"url": "postgres://u:Secr3tPw@h:notaport/db"}, "url", "value not shown"},
	} {
		err := validatePostgresSink(pgOpts(c.opts))
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(err.Error(), c.in) {
			t.Errorf("%v: error %v; want one at option %s naming %q", c.opts, err, c.option, c.in)
		}
		if err != nil && strings.Contains(err.Error(), "Secr3tPw") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if err := validatePostgresSink(pgOpts(map[string]any{"mode": "upsert", "key": []string{"k"}, "columns": []string{"k", "v"}})); err != nil {
		t.Errorf("a valid upsert: %v", err)
	}
	if err := postgresCheckDelivery(AtLeastOnce, pgOpts(map[string]any{"transaction-prefix": "p"})); err == nil {
		t.Error("a transaction-prefix with at-least-once is accepted")
	}
	if err := postgresCheckDelivery(ExactlyOnce, pgOpts(map[string]any{"transaction-prefix": "p"})); err != nil {
		t.Errorf("a transaction-prefix with exactly-once: %v", err)
	}
	for _, p := range []string{"a/b", strings.Repeat("x", 121)} {
		if checkTransactionPrefix(p) == nil {
			t.Errorf("transaction prefix %q accepted", p)
		}
	}
}

// TestPostgresStep decodes a record's value and refuses one that is not
// an object, naming the record's position.
func TestPostgresStep(t *testing.T) {
	step := postgresStep("pg")
	c, err := sourceCodecs(NewOptions(map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := step(KafkaRecord(&kgo.Record{Topic: "t", Partition: 1, Offset: 42, Value: []byte(`{"a": 1}`)}, c))
	if m, ok := r.Object(); err != nil || !ok || m["a"] != int64(1) {
		t.Errorf("an object: %v, %v", r.Value(), err)
	}
	// A format that reads other values (string, raw, csv, ...).
	_, err = step(NewRecord("text").WithPos(PosRef{&kgo.Record{Topic: "t", Partition: 1, Offset: 43}}))
	if err == nil || !strings.Contains(err.Error(), `is a string, not an object`) || !strings.Contains(err.Error(), `topic "t" partition 1 offset 43`) {
		t.Errorf("a string: %v", err)
	}
	// The JSON format refuses it when it decodes.
	if _, err = step(RawRecord([]byte(`[1]`), c)); err == nil || !strings.Contains(err.Error(), "decode the value") {
		t.Errorf("a JSON list: %v", err)
	}
}

// TestPostgresPassword: password-file's content without its trailing
// newline; an empty file is an error naming it.
func TestPostgresPassword(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pw")
	if err := os.WriteFile(f, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pw, set, err := postgresPassword(pgOpts(map[string]any{"password-file": f})); pw != "s3cret" || !set || err != nil {
		t.Errorf("password-file: %q %v %v", pw, set, err)
	}
	if _, set, err := postgresPassword(pgOpts(nil)); set || err != nil {
		t.Errorf("no password: set %v, %v", set, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := postgresPassword(pgOpts(map[string]any{"password-file": empty})); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("an empty password-file: %v", err)
	}
}

package pipeline

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/registry"
)

// TestValuesThatMakeNoSense checks that every nonsensical value of one
// file is reported in one pass, each at the line of its own key (not of
// its section).
func TestValuesThatMakeNoSense(t *testing.T) {
	yaml := `parallelism: 100000
checkpoint:
  dir: /tmp/x
  interval: -1s
  retain: 0
  timeout: 0s
restart:
  strategy: exponential
  attempts: 0
  delay: -5s
  max-delay: 0s
source:
  type: datagen
  options:
    count: -1
    splits: 0
    rate: -2
sink:
  type: file
  options:
    path: /tmp/out
    compact-below: -1
    file-mode: "0644x"
`
	_, err := Parse("p.yaml", []byte(yaml), registry.Default(), env(nil))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("got %v, want Errors", err)
	}
	want := []string{
		"p.yaml:1: parallelism: must be between 1 and 1024, got 100000",
		"p.yaml:4: checkpoint.interval: must be at least 0, got -1s",
		"p.yaml:5: checkpoint.retain: must be between 1 and 10000, got 0",
		"p.yaml:6: checkpoint.timeout: must be greater than 0, got 0s",
		"p.yaml:9: restart.attempts: must be at least 1, got 0",
		"p.yaml:10: restart.delay: must be greater than 0, got -5s",
		"p.yaml:11: restart.max-delay: must be greater than 0, got 0s",
		"p.yaml:15: source.options.count: must be at least 0, got -1",
		"p.yaml:16: source.options.splits: must be between 1 and 65536, got 0",
		"p.yaml:17: source.options.rate: must be at least 0, got -2",
		"p.yaml:22: sink.options.compact-below: must be at least 0, got -1",
		"p.yaml:23: sink.options.file-mode: want an octal permission such as 0600 or 0640, got 0644x",
	}
	got := strings.Split(es.Error(), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCrossFieldChecks(t *testing.T) {
	base := "source:\n  type: datagen\n  options:\n    count: 10\nsink:\n  type: print\n"
	tests := []struct{ name, yaml, want string }{
		{"max-delay below delay", base + "restart:\n  strategy: exponential\n  delay: 10s\n  max-delay: 1s\n",
			"p.yaml:10: restart.max-delay: must be at least delay (10s), got 1s"},
		{"more splits than records", "source:\n  type: datagen\n  options:\n    count: 10\n    splits: 20\nsink:\n  type: print\n",
			"p.yaml:4: source.options: splits: 20 splits for 10 records: some would be empty (want at most count)"},
		{"typo in a filter", base + "transforms:\n  - filter: amout > 100\n",
			`p.yaml:8: transforms[0].filter: no field "amout" in the records from source datagen (fields: id, amount, user)`},
		{"typo through record[]", base + "transforms:\n  - map: '{\"x\": record[\"usr\"]}'\n",
			`p.yaml:8: transforms[0].map: no field "usr" in the records from source datagen (fields: id, amount, user)`},
		{"field selected away", base + "transforms:\n  - select: [id]\n  - filter: amount > 1\n",
			`p.yaml:9: transforms[1].filter: no field "amount" in the records from transform select-1 (fields: id)`},
		{"field renamed", base + "transforms:\n  - rename: {amount: cents}\n  - filter: amount > 1\n",
			`p.yaml:9: transforms[1].filter: no field "amount" in the records from transform rename-1 (fields: id, user, cents)`},
		{"map literal keys", base + "transforms:\n  - map: '{\"cents\": amount * 100}'\n  - select: [amount]\n",
			`p.yaml:9: transforms[1].select: no field "amount" in the records from transform map-1 (fields: cents)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.yaml), registry.Default(), env(nil))
			if err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
	// What cannot be known is not refused: let variables, closures,
	// functions, a map that is not a literal, a source without a schema.
	for _, ok := range []string{
		base + "transforms:\n  - filter: let a = amount; a > 1 && len(user) > 0 && now() != nil\n",
		base + "transforms:\n  - map: 'amount > 1 ? record : {\"x\": 1}'\n  - filter: whatever > 1\n",
		base + "transforms:\n  - filter: 'all([1, 2], # > 0) && id >= 0'\n",
		"source:\n  type: file\n  options:\n    paths: [/tmp/in]\nsink:\n  type: print\ntransforms:\n  - filter: anything > 1\n",
	} {
		if _, err := Parse("p.yaml", []byte(ok), registry.Default(), env(nil)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestParallelismBeyondSplitsWarns(t *testing.T) {
	s, err := Parse("p.yaml", []byte("parallelism: 4\nsource:\n  type: datagen\n  options:\n    splits: 2\nsink:\n  type: print\n"), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := "p.yaml:1: parallelism: 4, but source datagen can keep only 2 subtasks busy with these options; the others stay idle"
	if !slices.Equal(s.Warnings, []string{want}) {
		t.Errorf("warnings %q, want %q", s.Warnings, want)
	}
}

// TestCommaSeparatedList checks that one string is a comma-separated
// list for list options: brokers: "h1:9092,h2:9092", also from ${VAR}.
func TestCommaSeparatedList(t *testing.T) {
	for _, v := range []string{`"h1:9092,h2:9092"`, `h1:9092, h2:9092`, `${BROKERS}`, `["h1:9092", "h2:9092"]`, `["${B1}", "${B2}"]`} {
		y := "source:\n  type: kafka\n  options:\n    brokers: " + v + "\n    topics: t\nsink:\n  type: print\n"
		s, err := Parse("p.yaml", []byte(y), registry.Default(), env(map[string]string{"BROKERS": "h1:9092,h2:9092", "B1": "h1:9092", "B2": "h2:9092"}))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if got := s.Source.Options.Strings("brokers"); !slices.Equal(got, []string{"h1:9092", "h2:9092"}) {
			t.Errorf("brokers: %s: got %q", v, got)
		}
	}
	_, err := Parse("p.yaml", []byte("source:\n  type: kafka\n  options:\n    brokers: a,,b\n    topics: t\nsink:\n  type: print\n"), registry.Default(), env(nil))
	if err == nil || err.Error() != "p.yaml:4: source.options.brokers: empty item in a comma-separated list" {
		t.Errorf("got %v", err)
	}
}

// TestUnquotedVarInFlowSequence: [${BROKERS}] is a YAML error (the { opens
// a mapping); the error says to quote it, at its line.
func TestUnquotedVarInFlowSequence(t *testing.T) {
	for _, y := range []string{
		"source:\n  type: kafka\n  options:\n    brokers: [${BROKERS}]\n    topics: t\nsink:\n  type: print\n",
		"source:\n  type: kafka\n  options:\n    brokers: [h1:9092, ${B2}]\n    topics: t\nsink:\n  type: print\n",
	} {
		_, err := Parse("p.yaml", []byte(y), registry.Default(), env(nil))
		if err == nil || !strings.HasPrefix(err.Error(), "p.yaml:4: invalid YAML: ") || !strings.Contains(err.Error(), `quote it, as in ["${BROKERS}"]`) {
			t.Errorf("got %v", err)
		}
	}
}

// TestSecretsRecorded: every text value from the environment is in
// Spec.Secrets, and the redactor hides it, also quoted as log handlers
// write it; short values are hidden only when the option is secret.
func TestSecretsRecorded(t *testing.T) {
	y := "checkpoint:\n  dir: ${DIR}/ckpt\n  interval: ${IV}\nsource:\n  type: datagen\nsink:\n  type: file\n  options:\n    path: ${DIR}/out\nhttp:\n  token: ${TOK}\n"
	s, err := Parse("p.yaml", []byte(y), registry.Default(), env(map[string]string{"DIR": `/data/s3cr"et`, "IV": "1s", "TOK": "ab"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.CheckpointInterval != time.Second {
		t.Fatal(s.CheckpointInterval)
	}
	r := NewRedactor(s.Secrets)
	in := `dir=/data/s3cr"et/ckpt msg="open \"/data/s3cr\"et/out\"" json:"/data/s3cr\"et" token=ab every 1s`
	want := `dir=${DIR}/ckpt msg="open \"${DIR}/out\"" json:"${DIR}" token=${TOK} every 1s`
	if got := r.String(in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestTypedValuesShown: values from the environment of number, duration,
// boolean and enum options are no secrets: they are not in Spec.Secrets,
// so logs show them (and other text that looks the same) as they are,
// while text values from the environment and secret options stay hidden.
func TestTypedValuesShown(t *testing.T) {
	y := `parallelism: ${PAR}
checkpoint:
  interval: ${IV}
  dir: ${DIR}
restart:
  strategy: ${STRATEGY}
  attempts: ${ATTEMPTS}
  delay: ${RESTART_DELAY}
source:
  type: datagen
  options:
    count: ${COUNT}
    rate: ${RATE}
sink:
  type: file
  options:
    path: ${OUT}
    compact-below: ${COMPACT}
http:
  token: ${TOKEN}
`
	vars := map[string]string{"PAR": "2", "IV": "1500ms", "DIR": "/data/ckpt-dir", "STRATEGY": "fixed-delay", "ATTEMPTS": "1000",
		"RESTART_DELAY": "250ms", "COUNT": "123456", "RATE": "2500.5", "OUT": "/data/out-dir", "COMPACT": "4096", "TOKEN": "t0k"}
	s, err := Parse("p.yaml", []byte(y), registry.Default(), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if s.Restart.Delay != 250*time.Millisecond || s.Restart.Attempts != 1000 || s.CheckpointInterval != 1500*time.Millisecond {
		t.Fatalf("restart %+v, interval %v", s.Restart, s.CheckpointInterval)
	}
	var got []string
	for _, sub := range s.Secrets {
		got = append(got, sub.Var)
	}
	slices.Sort(got)
	if want := []string{"DIR", "OUT", "TOKEN"}; !slices.Equal(got, want) {
		t.Errorf("Spec.Secrets has %v, want %v", got, want)
	}
	r := NewRedactor(s.Secrets)
	in := "restarting in 250ms (attempt 3 of 1000), fixed-delay; checkpoint every 1500ms took 250ms; 123456 records at 2500.5/s; " +
		"4096 bytes; /data/out-dir/part-0 /data/ckpt-dir/chk-1 token t0k"
	want := "restarting in 250ms (attempt 3 of 1000), fixed-delay; checkpoint every 1500ms took 250ms; 123456 records at 2500.5/s; " +
		"4096 bytes; ${OUT}/part-0 ${DIR}/chk-1 token ${TOKEN}"
	if got := r.String(in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestParseErrorsRedacted: a connector's own check that repeats a value
// (here the file loop check naming paths) does not show a value from the
// environment.
func TestParseErrorsRedacted(t *testing.T) {
	y := "source:\n  type: file\n  options:\n    paths: [${D}]\n    discovery: 1s\nsink:\n  type: file\n  options:\n    path: ${D}\n"
	_, err := Parse("p.yaml", []byte(y), registry.Default(), env(map[string]string{"D": "/tmp/topsecret-dir"}))
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Errorf("error shows the value: %v", err)
	}
}

// TestSecretOptionInTheFile: a token written in the file itself (not from
// ${VAR}) is hidden as ***.
func TestSecretOptionInTheFile(t *testing.T) {
	s, err := Parse("p.yaml", []byte("source: {type: datagen}\nsink: {type: print}\nhttp: {token: literal-tok}\n"), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := NewRedactor(s.Secrets).String("token=literal-tok"); got != "token=***" {
		t.Errorf("got %q", got)
	}
}

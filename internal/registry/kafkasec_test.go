package registry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
)

// secOpts returns the security options with their defaults, overridden
// by m.
func secOpts(m map[string]any) Options {
	all := map[string]any{}
	for _, o := range kafkaSecurityOptions {
		all[o.Name] = o.Default
	}
	for k, v := range m {
		all[k] = v
	}
	return NewOptions(all)
}

// TestKafkaSecurityOptionsRegistered: the source and the sink (and so the
// Kafka dead-letter sink) declare every security option.
func TestKafkaSecurityOptionsRegistered(t *testing.T) {
	src, ok := Default().Source("kafka")
	if !ok {
		t.Fatal("no kafka source")
	}
	sk, ok := Default().Sink("kafka")
	if !ok {
		t.Fatal("no kafka sink")
	}
	for _, want := range kafkaSecurityOptions {
		for what, opts := range map[string][]Option{"source": src.Options, "sink": sk.Options} {
			found := false
			for _, o := range opts {
				found = found || o.Name == want.Name
			}
			if !found {
				t.Errorf("kafka %s lacks option %s", what, want.Name)
			}
		}
	}
	if src.Validate == nil || sk.Validate == nil {
		t.Error("kafka source or sink does not validate its security options")
	}
}

func TestKafkaSecurityValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		m    map[string]any
		want string // "" = valid
	}{
		{"defaults", nil, ""},
		{"tls", map[string]any{"tls.enabled": true, "tls.ca-file": "ca.pem"}, ""},
		{"ca without tls", map[string]any{"tls.ca-file": "ca.pem"}, "tls.ca-file is set but tls.enabled is false"},
		{"skip-verify without tls", map[string]any{"tls.insecure-skip-verify": true}, "tls.insecure-skip-verify is set but tls.enabled is false"},
		{"skip-verify with a CA", map[string]any{"tls.enabled": true, "tls.insecure-skip-verify": true, "tls.ca-file": "ca.pem"}, "set one of them"},
		{"cert without key", map[string]any{"tls.enabled": true, "tls.cert-file": "c.pem"}, "set both or neither"},
		{"scram", map[string]any{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "p"}, ""},
		{"plain with a password file", map[string]any{"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password-file": "f"}, ""},
		{"scram without user", map[string]any{"sasl.mechanism": "SCRAM-SHA-256", "sasl.password": "p"}, "needs sasl.username"},
		{"scram without password", map[string]any{"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u"}, "needs one of sasl.password and sasl.password-file"},
		{"both passwords", map[string]any{"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p", "sasl.password-file": "f"}, "needs one of"},
		{"user without mechanism", map[string]any{"sasl.username": "u"}, "sasl.username is not used with sasl.mechanism none"},
		{"oauth file", map[string]any{"sasl.mechanism": "OAUTHBEARER", "sasl.token-file": "t"}, ""},
		{"oauth command", map[string]any{"sasl.mechanism": "OAUTHBEARER", "sasl.token-command": "echo t"}, ""},
		{"oauth neither", map[string]any{"sasl.mechanism": "OAUTHBEARER"}, "needs one of sasl.token-file and sasl.token-command"},
		{"oauth both", map[string]any{"sasl.mechanism": "OAUTHBEARER", "sasl.token-file": "t", "sasl.token-command": "c"}, "needs one of"},
		{"oauth with password", map[string]any{"sasl.mechanism": "OAUTHBEARER", "sasl.token-file": "t", "sasl.password": "p"}, "sasl.password is not used with sasl.mechanism OAUTHBEARER"},
		{"aws with user", map[string]any{"sasl.mechanism": "AWS_MSK_IAM", "sasl.username": "u"}, "not used with sasl.mechanism AWS_MSK_IAM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := validateKafkaSecurity(secOpts(c.m))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			case c.want != "" && !errors.Is(err, kafka.ErrInvalidConfig):
				t.Fatalf("%v does not match kafka.ErrInvalidConfig", err)
			}
		})
	}
}

// TestKafkaSecurityFiles: CA, key pair and password files are read at
// build; their errors name the option and the file, never the content.
func TestKafkaSecurityFiles(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	const secret = "s3cr3t-in-the-file"
	if err := os.WriteFile(notPEM, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    map[string]any
		want string
	}{
		{"CA not PEM", map[string]any{"tls.enabled": true, "tls.ca-file": notPEM}, "tls.ca-file " + notPEM + ": no PEM certificate"},
		{"CA missing", map[string]any{"tls.enabled": true, "tls.ca-file": filepath.Join(dir, "nope")}, "tls.ca-file: open " + filepath.Join(dir, "nope")},
		{"bad key pair", map[string]any{"tls.enabled": true, "tls.cert-file": notPEM, "tls.key-file": notPEM}, "tls.cert-file " + notPEM},
		{"password file missing", map[string]any{"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password-file": filepath.Join(dir, "nope")}, "sasl.password-file: open"},
		{"password file empty", map[string]any{"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password-file": empty}, "sasl.password-file " + empty + " is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := kafkaSecurity(secOpts(c.m), slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if !errors.Is(err, kafka.ErrInvalidConfig) {
				t.Errorf("%v does not match kafka.ErrInvalidConfig", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the file's content: %v", err)
			}
		})
	}
	t.Run("password file", func(t *testing.T) {
		f := filepath.Join(dir, "pw")
		if err := os.WriteFile(f, []byte("pw\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := kafkaPassword(secOpts(map[string]any{"sasl.password-file": f}))
		if err != nil || p != "pw" {
			t.Fatalf("got %q, %v; want pw", p, err)
		}
	})
}

// TestKafkaSecurityWarnings: skip-verify and PLAIN without TLS are
// logged as warnings; the password is not.
func TestKafkaSecurityWarnings(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	opts, err := kafkaSecurity(secOpts(map[string]any{"tls.enabled": true, "tls.insecure-skip-verify": true}), log)
	if err != nil || len(opts) != 1 {
		t.Fatalf("got %d options, %v", len(opts), err)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "tls.insecure-skip-verify") {
		t.Errorf("no warning about skip-verify: %q", buf.String())
	}
	buf.Reset()
	opts, err = kafkaSecurity(secOpts(map[string]any{"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "hunter2-password"}), log)
	if err != nil || len(opts) != 1 {
		t.Fatalf("got %d options, %v", len(opts), err)
	}
	if !strings.Contains(buf.String(), "clear text") || strings.Contains(buf.String(), "hunter2-password") {
		t.Errorf("want a warning about PLAIN without TLS and no password: %q", buf.String())
	}
	buf.Reset()
	if _, err := kafkaSecurity(secOpts(nil), log); err != nil || buf.Len() != 0 {
		t.Errorf("defaults: %v, logged %q", err, buf.String())
	}
}

// TestOAuthBearerTokenFile: the token is read from the file, again when
// the file changes, and an empty or missing file is an error.
func TestOAuthBearerTokenFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	src := &tokenFile{path: f}
	if _, err := src.token(t.Context()); err == nil || !strings.Contains(err.Error(), "sasl.token-file") {
		t.Fatalf("missing file: got %v", err)
	}
	if err := os.WriteFile(f, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := src.token(t.Context()); err != nil || tok != "first-token" {
		t.Fatalf("got %q, %v", tok, err)
	}
	// A refreshed token: another size, and another modification time.
	if err := os.WriteFile(f, []byte("the-second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, time.Time{}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if tok, err := src.token(t.Context()); err != nil || tok != "the-second-token" {
		t.Fatalf("after the change: got %q, %v", tok, err)
	}
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := src.token(t.Context()); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty file: got %v", err)
	}
}

// TestOAuthBearerTokenCommand: the command's output is the token; a
// failing, silent or hanging command is an error naming the command and
// the cause, never its output.
func TestOAuthBearerTokenCommand(t *testing.T) {
	ok := tokenCommand{cmd: "printf ' tok-from-command\\n'", timeout: time.Minute}
	if tok, err := ok.token(t.Context()); err != nil || tok != "tok-from-command" {
		t.Fatalf("got %q, %v", tok, err)
	}
	for _, c := range []struct {
		cmd     string
		timeout time.Duration
		want    []string
	}{
		{"echo leaked-token; echo no credentials >&2; exit 3", time.Minute, []string{"exit status 3", "no credentials"}},
		{"true", time.Minute, []string{"printed no token"}},
		{"echo partial-token; exec sleep 60", 50 * time.Millisecond, []string{"killed after sasl.token-command-timeout 50ms"}},
	} {
		_, err := tokenCommand{cmd: c.cmd, timeout: c.timeout}.token(t.Context())
		if err == nil {
			t.Fatalf("%s: no error", c.cmd)
		}
		for _, w := range append(c.want, "sasl.token-command") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not say %q", c.cmd, err, w)
			}
		}
		if strings.Contains(strings.ReplaceAll(err.Error(), c.cmd, ""), "token\n") {
			t.Errorf("%s: the error shows the output: %v", c.cmd, err)
		}
	}
}

// TestOAuthBearerMechanism: the token reaches the OAUTHBEARER client
// message; a token failure fails the authentication.
func TestOAuthBearerMechanism(t *testing.T) {
	m := oauthMechanism(tokenCommand{cmd: "echo abc.def.ghi", timeout: time.Minute})
	if m.Name() != "OAUTHBEARER" {
		t.Fatalf("name %s", m.Name())
	}
	_, msg, err := m.Authenticate(t.Context(), "127.0.0.1:9092")
	if err != nil || !bytes.Contains(msg, []byte("auth=Bearer abc.def.ghi")) {
		t.Fatalf("got %q, %v", msg, err)
	}
	m = oauthMechanism(tokenCommand{cmd: "exit 1", timeout: time.Minute})
	if _, _, err := m.Authenticate(context.Background(), "127.0.0.1:9092"); err == nil || !strings.Contains(err.Error(), "OAUTHBEARER token") {
		t.Fatalf("failing command: got %v", err)
	}
}

// TestAWSMSKIAM: credentials come from the environment; without them the
// build fails naming the variables; the signed message carries the access
// key, never the secret key.
func TestAWSMSKIAM(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	o := secOpts(map[string]any{"sasl.mechanism": "AWS_MSK_IAM", "tls.enabled": true})
	if _, err := kafkaSecurity(o, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("no credentials: got %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-secret-key")
	if opts, err := kafkaSecurity(o, slog.New(slog.DiscardHandler)); err != nil || len(opts) != 2 {
		t.Fatalf("got %d options, %v", len(opts), err)
	}
	m := awsMechanism()
	if m.Name() != "AWS_MSK_IAM" {
		t.Fatalf("name %s", m.Name())
	}
	_, msg, err := m.Authenticate(t.Context(), "b-1.demo.kafka.us-east-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(msg, []byte("AKIDEXAMPLE")) || !bytes.Contains(msg, []byte("us-east-1")) || bytes.Contains(msg, []byte("secret-key")) {
		t.Fatalf("message %s", msg)
	}
}

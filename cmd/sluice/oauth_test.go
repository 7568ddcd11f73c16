package main

// OAUTHBEARER through the binary, against the secured broker of
// `scripts/kafka.sh start-secure` (skipped without SLUICE_KAFKA_SECURE).
// The broker validates tokens with Kafka's unsecured validator: an
// unsigned JWT whose "sub" is the principal and whose "exp" it checks. So
// this proves sluice's side — the token read from a file or a command,
// sent over SASL_SSL, and a refused token failing fast — not the
// signature checks of an identity provider.

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unsecuredJWT returns an unsigned JWT for sub that expires at exp.
func unsecuredJWT(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." +
		enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d}`, sub, time.Now().Add(-time.Minute).Unix(), exp.Unix())) + "."
}

// TestKafkaOAuthBearer: datagen → Kafka (exactly once) authenticating with
// OAUTHBEARER, the sink's token from sasl.token-command, killed with -9
// once output is committed and resumed with --from: the topic holds every
// id once, and the token is in no output and no checkpoint. Then a
// Kafka → Kafka copy whose source reads the token from sasl.token-file
// copies it all. An expired token ends the run at once (exit 1, no
// restarts) with an error naming the broker and the SASL failure.
func TestKafkaOAuthBearer(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	sb := secureKafka(t)
	principal := fmt.Sprintf("oauth-%d", time.Now().UnixNano())
	sb.grantAll(t, "User:"+principal, nil)
	token := unsecuredJWT(principal, time.Now().Add(time.Hour))
	work := t.TempDir()
	tokenFile := filepath.Join(work, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	oauth := func(from string) string {
		return fmt.Sprintf("    tls.enabled: true\n    tls.ca-file: %s\n    sasl.mechanism: OAUTHBEARER\n    %s\n", sb.CAFile, from)
	}
	topic, copyTopic := sb.topic(t, 2), sb.topic(t, 2)
	const count = 30000

	file := writeNamedPipeline(t, work, "gen.yaml", fmt.Sprintf(`name: oauth-gen
delivery: exactly-once
checkpoint: {interval: 100ms, dir: %s}
source:
  type: datagen
  options: {count: %d, rate: 20000}
sink:
  type: kafka
  options:
    brokers: [%s]
    topic: %s
%s`, filepath.Join(work, "checkpoints"), count, sb.Brokers[0], topic, oauth("sasl.token-command: cat "+tokenFile)))
	p := start(t, nil, "run", "--progress", "off", file)
	sb.read(t, topic, 1) // bounded: some output is committed
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	r := run(t, nil, "run", "--progress", "off", "--from", filepath.Join(work, "checkpoints"), file)
	if r.code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", r.code, r.stderr)
	}
	checkIDsOnce(t, sb.read(t, topic, -1), count)
	if strings.Contains(p.stderr()+r.stdout+r.stderr, token) {
		t.Errorf("the token was printed")
	}
	checkNoSecretIn(t, filepath.Join(work, "checkpoints"), token)

	cp := writeNamedPipeline(t, work, "copy.yaml", fmt.Sprintf(`name: oauth-copy
delivery: exactly-once
checkpoint: {interval: 100ms, dir: %s}
source:
  type: kafka
  options:
    brokers: [%s]
    topics: [%s]
    scan.bounded.mode: latest-offset
%ssink:
  type: kafka
  options:
    brokers: [%s]
    topic: %s
%s`, filepath.Join(work, "copy-checkpoints"), sb.Brokers[0], topic, oauth("sasl.token-file: "+tokenFile),
		sb.Brokers[0], copyTopic, oauth("sasl.token-command: cat "+tokenFile)))
	if r := run(t, nil, "run", "--progress", "off", cp); r.code != 0 {
		t.Fatalf("copy: exit %d\n%s", r.code, r.stderr)
	}
	checkIDsOnce(t, sb.read(t, copyTopic, -1), count)

	expired := filepath.Join(work, "expired")
	if err := os.WriteFile(expired, []byte(unsecuredJWT(principal, time.Now().Add(-time.Hour))), 0o600); err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	bad := secSinkPipeline(t, d, sb.Brokers[0], topic, oauth("sasl.token-file: "+expired))
	r = run(t, nil, "run", "--progress", "off", bad)
	if r.code != 1 {
		t.Fatalf("expired token: exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, w := range []string{sb.Brokers[0], "SASL_AUTHENTICATION_FAILED"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("expired token: stderr does not name %q:\n%s", w, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "restarting from") || !strings.Contains(r.stderr, "0 restarts") {
		t.Errorf("expired token: the job was restarted:\n%s", r.stderr)
	}
}

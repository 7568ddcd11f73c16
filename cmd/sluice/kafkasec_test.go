package main

// Secured Kafka through the binary, against the SASL_SSL broker of
// `scripts/kafka.sh start-secure` (skipped without SLUICE_KAFKA_SECURE):
// a Kafka → Kafka pipeline through SCRAM-SHA-512 and TLS with the CA,
// exactly once across kill -9 and --from; a wrong password, a CA that did
// not sign the broker's certificate and TLS to a plaintext port each fail
// fast with an error naming the broker and the cause and never the
// secret. Outputs are read by an independent read_committed consumer.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/testutil/testcerts"
)

// secBroker is what client.json of `scripts/kafka.sh start-secure` holds.
type secBroker struct {
	Brokers []string `json:"brokers"`
	CAFile  string   `json:"ca_file"`
	Admin   struct {
		User     string `json:"user"`
		Password string `json:"password"`
	} `json:"admin"`
}

func secureKafka(t *testing.T) *secBroker {
	t.Helper()
	path := os.Getenv("SLUICE_KAFKA_SECURE")
	if path == "" {
		t.Skip("SLUICE_KAFKA_SECURE is not set: start the secured broker with `eval \"$(scripts/kafka.sh start-secure)\"; export SLUICE_KAFKA_SECURE SLUICE_KAFKA_SECURE_RUN`")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sb secBroker
	if err := json.Unmarshal(data, &sb); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &sb
}

// opts are the client options of the super user, for the test's own
// clients (topics, users, ACLs, producing the input, reading the output).
func (sb *secBroker) opts(t *testing.T) []kgo.Opt {
	t.Helper()
	pem, err := os.ReadFile(sb.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", sb.CAFile)
	}
	return []kgo.Opt{kgo.SeedBrokers(sb.Brokers...), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: sb.Admin.User, Pass: sb.Admin.Password}.AsMechanism())}
}

func (sb *secBroker) client(t *testing.T, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(sb.opts(t), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// retry runs fn until it succeeds, at most 100 times 100ms apart: users
// and ACLs reach the broker's authenticator and authorizer a moment after
// the controller accepted them.
func retry(t *testing.T, what string, fn func(context.Context) error) {
	t.Helper()
	var err error
	for range 100 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err = fn(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// scramUser creates a SCRAM-SHA-512 user with a random password that may
// read and write topics, join groups and use transactional ids (deleted
// when the test ends), and waits until the broker accepts it.
func (sb *secBroker) scramUser(t *testing.T) (user, pass string) {
	t.Helper()
	user, pass = fmt.Sprintf("cli-%d", time.Now().UnixNano()), rand.Text()
	adm := kadm.NewClient(sb.client(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create user: %v", err)
	}
	sb.grantAll(t, "User:"+user, func(ctx context.Context, adm *kadm.Client) {
		_, _ = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha512}}, nil)
	})
	retry(t, "the broker accepts the new user", func(ctx context.Context) error {
		o := append(sb.opts(t)[:2:2], kgo.SASL(scramAuth(user, pass)))
		cl, err := kgo.NewClient(o...)
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).ListTopics(ctx)
		return err
	})
	return user, pass
}

// grantAll lets principal read and write every topic, join every group and
// use every transactional id; the ACLs are deleted when the test ends,
// after which cleanup (optional) runs with an admin client.
func (sb *secBroker) grantAll(t *testing.T, principal string, cleanup func(context.Context, *kadm.Client)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(sb.client(t))
	acl := kadm.NewACLs().Allow(principal).AllowHosts("*").
		Topics("*").Groups("*").TransactionalIDs("*").Operations(kadm.OpAll)
	acls, err := adm.CreateACLs(ctx, acl)
	if err == nil {
		for _, r := range acls {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(sb.opts(t)...)
		if err != nil {
			return
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		_, _ = adm.DeleteACLs(ctx, acl)
		if cleanup != nil {
			cleanup(ctx, adm)
		}
	})
}

func (sb *secBroker) topic(t *testing.T, partitions int32) string {
	t.Helper()
	name := fmt.Sprintf("clisec-%d-%d", time.Now().UnixNano(), topicSeq.Add(1))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(sb.client(t)).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}

// produce writes {"id": i} for i in [from, to) to topic.
func (sb *secBroker) produce(t *testing.T, topic string, from, to int) {
	t.Helper()
	cl := sb.client(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := from; i < to; i++ {
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d}`, i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// read reads topic read_committed until want records arrived (bounded by
// two minutes) or, with want < 0, until nothing arrives for two seconds.
func (sb *secBroker) read(t *testing.T, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := sb.client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	return pollTopic(t, cl, topic, want)
}

// TestKafkaSecuredKill9Resume runs examples/pipelines/kafka-secured.yaml
// (Kafka → Kafka through SASL_SSL, SCRAM-SHA-512 with the password from
// ${KAFKA_PASSWORD} in the source and from a file in the sink), kills it with
// SIGKILL once output is committed, adds input and resumes with --from:
// the output topic holds every input record exactly once, and the
// password is in no output.
func TestKafkaSecuredKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	sb := secureKafka(t)
	user, pass := sb.scramUser(t)
	in, out := sb.topic(t, 2), sb.topic(t, 2)
	work := t.TempDir()
	passFile := filepath.Join(work, "password")
	if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := pipelines + "kafka-secured.yaml"
	env := []string{"CHECKPOINT_INTERVAL=100ms", "CHECKPOINTS=" + filepath.Join(work, "checkpoints"), "KAFKA_BROKERS=" + strings.Join(sb.Brokers, ","),
		"IN=" + in, "OUT_TOPIC=" + out, "KAFKA_CA_FILE=" + sb.CAFile, "KAFKA_USER=" + user, "KAFKA_PASSWORD=" + pass,
		"KAFKA_PASSWORD_FILE=" + passFile}
	const first, total = 50000, 80000
	sb.produce(t, in, 0, first)

	p := start(t, env, "run", "--progress", "off", file)
	sb.read(t, out, 1) // bounded: some output is committed
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	killed := len(sb.read(t, out, -1))
	if killed == 0 {
		t.Fatalf("nothing committed before the kill\n%s", p.stderr())
	}
	t.Logf("killed with %d of %d records committed", killed, first)
	if strings.Contains(p.stderr(), pass) {
		t.Errorf("the first run printed the password")
	}

	sb.produce(t, in, first, total)
	p = start(t, env, "run", "--progress", "off", "--from", filepath.Join(work, "checkpoints"), file)
	sb.read(t, out, total) // bounded by two minutes
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, p.stderr())
	}
	if m := lossRE.FindAllString(p.stderr(), -1); len(m) > 0 {
		t.Errorf("the resumed run logged %q:\n%s", m, p.stderr())
	}
	if strings.Contains(p.stderr(), pass) {
		t.Errorf("the resumed run printed the password")
	}
	checkIDsOnce(t, sb.read(t, out, -1), total)
	checkNoSecretIn(t, filepath.Join(work, "checkpoints"), pass)
}

// checkNoSecretIn fails if any file under dir contains secret.
func checkNoSecretIn(t *testing.T, dir, secret string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the password", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// secSinkPipeline writes datagen records to a Kafka sink with the given
// security options (a restart strategy that would retry for minutes).
func secSinkPipeline(t *testing.T, dir, brokers, topic, security string) string {
	t.Helper()
	return writeNamedPipeline(t, dir, "p.yaml", fmt.Sprintf(`name: secfail
delivery: exactly-once
checkpoint:
  interval: 100ms
  dir: %s
restart:
  strategy: fixed-delay
  attempts: 100
  delay: 1s
source:
  type: datagen
  options: {count: 100}
sink:
  type: kafka
  options:
    brokers: [%s]
    topic: %s
    connect-timeout: 2m
%s`, filepath.Join(dir, "checkpoints"), brokers, topic, security))
}

// TestKafkaSecuredFailures: a wrong password, a CA that did not sign the
// broker's certificate, and TLS to a port that speaks plaintext each end
// the run with exit code 1 within one attempt (no restarts although the
// strategy allows a hundred), with an error that names the broker and the
// cause, and the password appears in no output.
func TestKafkaSecuredFailures(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	sb := secureKafka(t)
	user, pass := sb.scramUser(t)
	topic := sb.topic(t, 1)
	broker := sb.Brokers[0]
	wrong := rand.Text()
	dir := t.TempDir()
	otherCA := testcerts.NewCA(t, "other-ca").WriteFile(t, dir) // a CA that signed nothing of the broker's
	plainBroker := plaintextPort(t)

	for _, c := range []struct {
		name, broker, security string
		env                    []string
		want                   []string
	}{
		{"wrong password", broker, fmt.Sprintf(`    tls.enabled: true
    tls.ca-file: %s
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: %s
    sasl.password: ${SECPASS}
`, sb.CAFile, user), []string{"SECPASS=" + wrong}, []string{broker, "SASL_AUTHENTICATION_FAILED"}},
		{"other CA", broker, fmt.Sprintf(`    tls.enabled: true
    tls.ca-file: %s
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: %s
    sasl.password: ${SECPASS}
`, otherCA, user), []string{"SECPASS=" + pass}, []string{broker, "certificate signed by unknown authority"}},
		{"TLS to plaintext", plainBroker, `    tls.enabled: true
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: u
    sasl.password: ${SECPASS}
`, []string{"SECPASS=" + pass}, []string{plainBroker, "tls"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			file := secSinkPipeline(t, d, c.broker, topic, c.security)
			r := run(t, c.env, "run", "--progress", "off", file)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\nstderr:\n%s", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "restarting from") || !strings.Contains(r.stderr, "0 restarts") {
				t.Errorf("the job was restarted:\n%s", r.stderr)
			}
			if strings.Contains(r.stderr, "cannot reach broker") {
				t.Errorf("a refused TLS/SASL setting is logged as an unreachable broker:\n%s", r.stderr)
			}
			for _, s := range []string{pass, wrong} {
				if strings.Contains(r.stdout+r.stderr, s) {
					t.Errorf("a password is in the output:\n%s", r.stderr)
				}
			}
			t.Log(r.stderr)
		})
	}
}

func scramAuth(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

// plaintextPort listens on 127.0.0.1 like a Kafka plaintext listener
// does to a TLS client: it reads the first bytes (a TLS ClientHello, which
// Kafka takes for a request of an impossible size) and closes the
// connection. It stops when the test ends.
func plaintextPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = c.Read(make([]byte, 4096))
			_ = c.Close()
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// TestKafkaSecurityConfigErrors: security options that do not go together
// are refused by `sluice validate` (exit 2, one line, at the connector),
// a CA file without a certificate by `sluice run` at start (exit 2, naming
// the file); a password written in the file is shown by neither.
func TestKafkaSecurityConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "written-in-the-file-secret"
	p := writeNamedPipeline(t, dir, "p.yaml", fmt.Sprintf(`name: z
delivery: at-least-once
source:
  type: kafka
  options:
    brokers: ["127.0.0.1:1"]
    topics: [t]
    tls.ca-file: %s
    sasl.mechanism: SCRAM-SHA-256
    sasl.password: %s
sink: {type: print}
`, bad, secret))
	r := run(t, nil, "validate", p)
	for _, w := range []string{"tls.ca-file is set but tls.enabled is false", "; sasl.mechanism SCRAM-SHA-256 needs sasl.username"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("validate does not say %q:\n%s", w, r.stderr)
		}
	}
	if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("validate: exit %d, want 2, one line, no password:\n%s", r.code, r.stderr)
	}
	p = writeNamedPipeline(t, dir, "p.yaml", fmt.Sprintf(`name: z
delivery: at-least-once
source:
  type: kafka
  options:
    brokers: ["127.0.0.1:1"]
    topics: [t]
    tls.enabled: true
    tls.ca-file: %s
    sasl.mechanism: SCRAM-SHA-256
    sasl.username: u
    sasl.password: %s
sink: {type: print}
`, bad, secret))
	r = run(t, nil, "run", "--progress", "off", p)
	if r.code != 2 || !strings.Contains(r.stderr, "tls.ca-file "+bad+": no PEM certificate in it") || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("run: exit %d, want 2 naming the CA file and no password:\n%s", r.code, r.stderr)
	}
}

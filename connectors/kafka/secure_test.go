package kafka

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// secureEnv names the file that `scripts/kafka.sh start-secure` writes to
// describe its SASL_SSL broker with ACL authorization.
const secureEnv = "SLUICE_KAFKA_SECURE"

type credentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// secureBroker is the broker of `scripts/kafka.sh start-secure`: one
// SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), a self-signed
// CA, ACLs enforced, super user Admin, and an ordinary PLAIN user Client
// that has no ACLs but those the tests grant.
type secureBroker struct {
	Brokers []string    `json:"brokers"`
	CAFile  string      `json:"ca_file"`
	Admin   credentials `json:"admin"`
	Client  credentials `json:"client"`
	tls     *tls.Config
}

func secureBrokerFromEnv(t *testing.T) *secureBroker {
	t.Helper()
	path := os.Getenv(secureEnv)
	if path == "" {
		t.Skipf("%s is not set: start the secured broker with `eval \"$(scripts/kafka.sh start-secure)\"; export %s` to run this against Apache Kafka with TLS, SASL and ACLs", secureEnv, secureEnv)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", secureEnv, err)
	}
	var sb secureBroker
	if err := json.Unmarshal(data, &sb); err != nil {
		t.Fatalf("%s: %s: %v", secureEnv, path, err)
	}
	ca, err := os.ReadFile(sb.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", sb.CAFile)
	}
	sb.tls = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &sb
}

// adminOpts are the client options of the super user.
func (sb *secureBroker) adminOpts() []kgo.Opt {
	return []kgo.Opt{TLS(sb.tls.Clone()), SASLPlain(sb.Admin.User, sb.Admin.Password)}
}

func (sb *secureBroker) admin(t *testing.T) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, sb.Brokers, sb.adminOpts()...))
}

// identity is a principal the tests act as.
type identity struct {
	user string
	mech string
	sasl kgo.Opt
}

func (id identity) principal() string { return "User:" + id.user }

// source and sink options of the identity: TLS and its SASL mechanism.
func (id identity) sourceOpts(sb *secureBroker) SourceOption {
	return SourceClientOpts(TLS(sb.tls.Clone()), id.sasl)
}

func (id identity) sinkOpts(sb *secureBroker) SinkOption {
	return SinkClientOpts(TLS(sb.tls.Clone()), id.sasl)
}

// plainClient is the script's ordinary PLAIN user.
func (sb *secureBroker) plainClient() identity {
	return identity{user: sb.Client.User, mech: "PLAIN", sasl: SASLPlain(sb.Client.User, sb.Client.Password)}
}

// scramUser creates a SCRAM user with a random password (deleted when the
// test ends) and waits until the broker accepts its credentials.
func (sb *secureBroker) scramUser(t *testing.T, sha512 bool) identity {
	t.Helper()
	user, pass := uniqueName("scram"), rand.Text()
	mech, name := kadm.ScramSha256, "SCRAM-SHA-256"
	if sha512 {
		mech, name = kadm.ScramSha512, "SCRAM-SHA-512"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := sb.admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: mech, Iterations: 4096, Password: pass}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create %s user %s: %v", name, user, err)
	}
	t.Cleanup(func() {
		sb.withAdmin(t, func(ctx context.Context, adm *kadm.Client) error {
			res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: mech}}, nil)
			if err == nil {
				err = res.Error()
			}
			return err
		})
	})
	id := identity{user: user, mech: name, sasl: SASLScram(user, pass, sha512)}
	sb.waitUntil(t, "the broker accepts the credentials of "+user, func(ctx context.Context) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sb.Brokers...), TLS(sb.tls.Clone()), id.sasl)
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.Ping(ctx)
	})
	return id
}

// withAdmin runs fn with an admin client of its own, for cleanups (which
// run after t.Context is canceled and after the test's clients may be
// closed).
func (sb *secureBroker) withAdmin(t *testing.T, fn func(context.Context, *kadm.Client) error) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sb.Brokers...)}, sb.adminOpts()...)...)
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fn(ctx, kadm.NewClient(cl)); err != nil {
		t.Errorf("cleanup on the secure broker: %v", err)
	}
}

// waitUntil retries fn (at most 100 times, 100ms apart) until it succeeds:
// users and ACLs reach the broker's authenticator and authorizer through
// the metadata log, a moment after the controller accepted them.
func (sb *secureBroker) waitUntil(t *testing.T, what string, fn func(context.Context) error) {
	t.Helper()
	var err error
	for range 100 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err = fn(ctx)
		cancel()
		if err == nil || t.Context().Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// grant creates the ACLs of b (which must name principals, hosts,
// resources and operations), deletes them when the test ends, and waits
// until the broker's authorizer serves them.
func (sb *secureBroker) grant(t *testing.T, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	adm := sb.admin(t)
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %s %v %v on %v %q: %v %s", r.Principal, r.Operation, r.Permission, r.Type, r.Name, r.Err, r.ErrMessage)
		}
	}
	t.Cleanup(func() {
		sb.withAdmin(t, func(ctx context.Context, adm *kadm.Client) error {
			_, err := adm.DeleteACLs(ctx, b)
			return err
		})
	})
	sb.waitUntil(t, "the ACLs are served", func(ctx context.Context) error {
		rs, err := adm.DescribeACLs(ctx, b)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Err != nil {
				return r.Err
			}
			if len(r.Described) == 0 {
				return errors.New("not all ACLs are visible yet")
			}
		}
		return nil
	})
}

// allow starts an ACL builder for the principal from any host.
func allow(id identity) *kadm.ACLBuilder {
	return kadm.NewACLs().Allow(id.principal()).AllowHosts("*")
}

func (sb *secureBroker) createTopic(t *testing.T, partitions int32) string {
	t.Helper()
	name := uniqueName("sec")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := sb.admin(t).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}

// TestSecureRoundTrip runs, as an ordinary user with only the ACLs it
// needs, over TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) against
// Apache Kafka with ACL authorization: datagen → exactly-once sink into
// topic in, then source(in) → exactly-once sink into topic out with two
// injected failures (so recovery — committing restored transactions,
// fencing, listing transactions — runs under the same ACLs). A
// read_committed consumer must see 0..count-1 once each, in order per key,
// in both topics.
func TestSecureRoundTrip(t *testing.T) {
	sb := secureBrokerFromEnv(t)
	cases := []struct {
		name string
		id   func(t *testing.T) identity
	}{
		{"PLAIN", func(*testing.T) identity { return sb.plainClient() }},
		{"SCRAM-SHA-256", func(t *testing.T) identity { return sb.scramUser(t, false) }},
		{"SCRAM-SHA-512", func(t *testing.T) identity { return sb.scramUser(t, true) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const count, parallelism = 6000, 3
			id := c.id(t)
			in, out := sb.createTopic(t, 3), sb.createTopic(t, 3)
			prefix := uniqueName("secure")
			// Least privilege: in is written and read, out only
			// written, the transactional ids are the sink's prefix.
			sb.grant(t, allow(id).Topics(in).Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe))
			sb.grant(t, allow(id).Topics(out).Operations(kadm.OpWrite, kadm.OpDescribe))
			sb.grant(t, allow(id).TransactionalIDs(prefix+"-").ResourcePatternType(kadm.ACLPatternPrefixed).
				Operations(kadm.OpWrite, kadm.OpDescribe))

			if err := produceIndexesErr(t, sb.Brokers, in, count, id.sinkOpts(sb), TransactionalIDPrefix(prefix+"-fill"),
				SetupTimeout(30*time.Second)); err != nil {
				t.Fatalf("datagen → kafka as %s: %v", id.principal(), err)
			}
			checkIndexes(t, readCommitted(t, sb.Brokers, in, count, 3*time.Second, sb.adminOpts()...), count)

			plan := faultinject.NewPlan(
				faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 0, Records: count / parallelism / 3},
				faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 1, Checkpoint: 3},
			)
			src, err := NewSource(sb.Brokers, RecordDeserializer(), Topics(in), Bounded(Latest()), SourceLogger(quiet), id.sourceOpts(sb))
			if err != nil {
				t.Fatal(err)
			}
			sk, err := NewSink(sb.Brokers, SerializerFunc[keyed](func(v keyed, r *kgo.Record) error {
				r.Key, r.Value = []byte(v.Key), strconv.AppendInt(nil, v.V, 10)
				return nil
			}), DefaultTopic(out), DeliveryGuarantee(ExactlyOnce), TransactionalIDPrefix(prefix+"-copy"),
				TransactionTimeout(time.Minute), SetupTimeout(30*time.Second), SinkLogger(quiet), id.sinkOpts(sb))
			if err != nil {
				t.Fatal(err)
			}
			env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(100*time.Millisecond),
				stream.Restart(restart.FixedDelay(5, 0)), stream.Logger(stream.DiscardLogger()))
			s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Record](), "in")
			m := stream.Map(s, func(r Record) keyed {
				v, _ := strconv.ParseInt(string(r.Value), 10, 64)
				return keyed{Key: string(r.Key), V: v}
			}, stream.Name("parse"))
			stream.SinkTo(m, faultinject.WrapSink(sk, plan), "out")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			res, err := env.Execute(ctx, "secure-kafka-to-kafka")
			if err != nil {
				t.Fatalf("kafka → kafka as %s: %v (fired %v)", id.principal(), err, plan.Fired())
			}
			t.Logf("as %s over TLS+SASL/%s: %d faults fired %v, %d restarts, %d checkpoints",
				id.principal(), id.mech, len(plan.Fired()), plan.Fired(), res.Restarts, res.Checkpoints.Completed)
			checkIndexes(t, readCommitted(t, sb.Brokers, out, count, 3*time.Second, sb.adminOpts()...), count)
			checkNoOpenTransactions(t, sb.Brokers, prefix+"-fill", sb.adminOpts()...)
			checkNoOpenTransactions(t, sb.Brokers, prefix+"-copy", sb.adminOpts()...)
		})
	}
}

// TestSecureAuthorizationErrors runs sources and sinks as a user that lacks
// one ACL each and checks that the job fails (rather than hangs or
// retries forever) with an *AuthorizationError that names the principal,
// the topic or transactional id and the operation, and wraps both
// ErrNotAuthorized and the broker's error.
func TestSecureAuthorizationErrors(t *testing.T) {
	sb := secureBrokerFromEnv(t)
	id := sb.plainClient()

	t.Run("source without READ", func(t *testing.T) {
		topic := sb.createTopic(t, 2)
		sb.fill(t, topic, 10)
		sb.grant(t, allow(id).Topics(topic).Operations(kadm.OpDescribe))
		src, err := NewSource(sb.Brokers, StringDeserializer(), Topics(topic), Bounded(Latest()), SourceLogger(quiet), id.sourceOpts(sb))
		if err != nil {
			t.Fatal(err)
		}
		checkAuthzError(t, runToStore(t, src, 1), id, "topic", topic, "READ", kerr.TopicAuthorizationFailed)
	})

	t.Run("source without DESCRIBE", func(t *testing.T) {
		topic := sb.createTopic(t, 1)
		src, err := NewSource(sb.Brokers, StringDeserializer(), Topics(topic), Bounded(Latest()), SourceLogger(quiet), id.sourceOpts(sb))
		if err != nil {
			t.Fatal(err)
		}
		checkAuthzError(t, runToStore(t, src, 1), id, "topic", topic, "DESCRIBE", kerr.TopicAuthorizationFailed)
	})

	t.Run("exactly-once sink without WRITE on the topic", func(t *testing.T) {
		topic := sb.createTopic(t, 1)
		prefix := uniqueName("denied")
		sb.grant(t, allow(id).Topics(topic).Operations(kadm.OpDescribe))
		sb.grant(t, allow(id).TransactionalIDs(prefix+"-").ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpWrite, kadm.OpDescribe))
		err := produceIndexesErr(t, sb.Brokers, topic, 100, id.sinkOpts(sb), TransactionalIDPrefix(prefix), SetupTimeout(30*time.Second))
		checkAuthzError(t, err, id, "topic", topic, "WRITE", kerr.TopicAuthorizationFailed)
		checkNoOpenTransactions(t, sb.Brokers, prefix, sb.adminOpts()...)
	})

	t.Run("exactly-once sink without the transactional id", func(t *testing.T) {
		topic := sb.createTopic(t, 1)
		prefix := uniqueName("denied")
		sb.grant(t, allow(id).Topics(topic).Operations(kadm.OpWrite, kadm.OpDescribe))
		err := produceIndexesErr(t, sb.Brokers, topic, 100, id.sinkOpts(sb), TransactionalIDPrefix(prefix), SetupTimeout(30*time.Second))
		// Both subtasks fence their ids first; either may fail first.
		checkAuthzError(t, err, id, "transactional id", prefix+"-", "WRITE", kerr.TransactionalIDAuthorizationFailed)
	})

	t.Run("at-least-once sink without WRITE on the topic", func(t *testing.T) {
		// The user may write another topic, so the idempotent producer
		// gets its producer id (Kafka allows that with WRITE on any
		// topic) and the produce request is what is denied.
		topic, other := sb.createTopic(t, 1), sb.createTopic(t, 1)
		sb.grant(t, allow(id).Topics(topic).Operations(kadm.OpDescribe))
		sb.grant(t, allow(id).Topics(other).Operations(kadm.OpWrite, kadm.OpDescribe))
		err := produceIndexesErr(t, sb.Brokers, topic, 100, id.sinkOpts(sb), DeliveryGuarantee(AtLeastOnce))
		checkAuthzError(t, err, id, "topic", topic, "WRITE", kerr.TopicAuthorizationFailed)
	})

	t.Run("at-least-once sink of a user who may write nothing", func(t *testing.T) {
		// A fresh user without any ACL: the idempotent producer's
		// InitProducerID needs IDEMPOTENT_WRITE on the cluster.
		nobody := sb.scramUser(t, false)
		topic := sb.createTopic(t, 1)
		sb.grant(t, allow(nobody).Topics(topic).Operations(kadm.OpDescribe))
		err := produceIndexesErr(t, sb.Brokers, topic, 100, nobody.sinkOpts(sb), DeliveryGuarantee(AtLeastOnce))
		checkAuthzError(t, err, nobody, "cluster", "", "IDEMPOTENT_WRITE", kerr.ClusterAuthorizationFailed)
		if !strings.Contains(err.Error(), strconv.Quote(topic)) {
			t.Errorf("message %q does not name the topic %q the records were for", err, topic)
		}
	})
}

// fill writes n records to topic as the super user.
func (sb *secureBroker) fill(t *testing.T, topic string, n int) {
	t.Helper()
	cl := newClient(t, sb.Brokers, append(sb.adminOpts(), kgo.DefaultProduceTopic(topic))...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range n {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkAuthzError asserts that err is the job's authorization failure:
// not a timeout, ErrNotAuthorized and cause with errors.Is, an
// *AuthorizationError with the principal, resource, operation and a name
// starting with name, and a message naming principal and resource.
func checkAuthzError(t *testing.T, err error, id identity, resource, name, op string, cause error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s denied to %s", resource, id.principal())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("the job hung until its deadline: %v", err)
	}
	if !errors.Is(err, ErrNotAuthorized) || !errors.Is(err, cause) {
		t.Fatalf("got %v; want an error wrapping ErrNotAuthorized and %v", err, cause)
	}
	var ae *AuthorizationError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v; want an *AuthorizationError in the chain", err)
	}
	if ae.Principal != id.principal() || ae.Mechanism != id.mech || ae.Resource != resource || ae.Operation != op || !strings.HasPrefix(ae.Name, name) {
		t.Fatalf("got %+v; want principal %s (%s), %s %q…, operation %s", *ae, id.principal(), id.mech, resource, name, op)
	}
	msg := err.Error()
	if !strings.Contains(msg, id.principal()) || (name != "" && !strings.Contains(msg, strconv.Quote(ae.Name))) ||
		!strings.Contains(msg, "not authorized") || !strings.Contains(msg, op+" "+resource) {
		t.Fatalf("message %q does not name the principal %s, the %s %q and the authorization failure", msg, id.principal(), resource, ae.Name)
	}
	t.Log(err)
}

package kafka

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Sentinel errors; the errors returned wrap them with details.
var (
	// ErrInvalidConfig is wrapped by every configuration error; the message
	// names the option and what is allowed.
	ErrInvalidConfig = errors.New("kafka: invalid configuration")
	// ErrMalformedRecord is wrapped by the error of a record the
	// deserializer rejected; the message names topic, partition and offset.
	ErrMalformedRecord = errors.New("kafka: malformed record")
	// ErrNoFreeTransactionSlot is returned by an exactly-once writer whose
	// every transactional id still holds a prepared, uncommitted
	// transaction (checkpoints are not completing); the job restarts.
	ErrNoFreeTransactionSlot = errors.New("kafka: no free transactional id slot")
	// ErrTopicNotFound is wrapped when a configured topic does not exist.
	ErrTopicNotFound = errors.New("kafka: topic not found")
	// ErrTransactionTimeout is wrapped when the transaction timeout exceeds
	// the broker's transaction.max.timeout.ms.
	ErrTransactionTimeout = errors.New("kafka: transaction timeout too large")
	// ErrNotAuthorized is wrapped when the broker denies an operation
	// (ACL authorization failure). The error is an *AuthorizationError,
	// which names the principal, the resource and the operation; it also
	// wraps the broker's error (kerr.TopicAuthorizationFailed,
	// kerr.TransactionalIDAuthorizationFailed, kerr.GroupAuthorizationFailed
	// or kerr.ClusterAuthorizationFailed).
	ErrNotAuthorized = errors.New("kafka: not authorized")
	// ErrBrokersUnreachable is wrapped (by an *UnreachableError) when a
	// source or sink could reach no broker for its connect timeout
	// ([SinkConnectTimeout], [SourceConnectTimeout]).
	ErrBrokersUnreachable = errors.New("brokers unreachable")
)

// AuthorizationError is a request the broker refused because the client's
// principal lacks an ACL. It matches ErrNotAuthorized and the broker's
// error with errors.Is.
type AuthorizationError struct {
	// Principal is "User:<name>" when the client authenticates with
	// [SASLPlain] or [SASLScram]; otherwise it is empty (the SASL
	// mechanism is named in Mechanism, if any).
	Principal string
	// Mechanism is the SASL mechanism the client authenticated with, if
	// any ("PLAIN", "SCRAM-SHA-256", …).
	Mechanism string
	// Resource is "topic", "transactional id", "group" or "cluster".
	Resource string
	// Name is the topic, transactional id or group ("" for the cluster).
	Name string
	// Operation is the ACL operation the request needed: "READ",
	// "WRITE", "DESCRIBE" or, for the cluster, "IDEMPOTENT_WRITE" (an
	// idempotent producer needs it unless the principal may WRITE some
	// topic).
	Operation string
	// Brokers are the brokers the client was configured with.
	Brokers []string
	// Err is the broker's error.
	Err error
}

func (e *AuthorizationError) Error() string {
	var b strings.Builder
	b.WriteString("kafka: not authorized: ")
	switch {
	case e.Principal != "":
		fmt.Fprintf(&b, "principal %s", e.Principal)
	case e.Mechanism != "":
		fmt.Fprintf(&b, "the client's principal (SASL %s)", e.Mechanism)
	default:
		b.WriteString("the client's principal (no SASL user configured)")
	}
	fmt.Fprintf(&b, " may not %s %s", e.Operation, e.Resource)
	if e.Name != "" {
		fmt.Fprintf(&b, " %q", e.Name)
	}
	fmt.Fprintf(&b, " on brokers %v (the ACLs do not allow it): %v", e.Brokers, e.Err)
	return b.String()
}

// Unwrap returns ErrNotAuthorized and the broker's error.
func (e *AuthorizationError) Unwrap() []error { return []error{ErrNotAuthorized, e.Err} }

// ACL operations, as Kafka names them.
const (
	opRead     = "READ"
	opWrite    = "WRITE"
	opDescribe = "DESCRIBE"
)

// resourceNames are the resources a request touched, for naming the one an
// authorization failure is about.
type resourceNames struct {
	topic, txnID, group string
}

// authzError returns err as an *AuthorizationError when it is an
// authorization failure, naming the resource from names and the principal
// from cl's SASL options; any other error is returned unchanged.
func authzError(err error, cl *kgo.Client, brokers []string, op string, names resourceNames) error {
	var kind, name string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotAuthorized):
		return err // already described
	case isSecurityErr(err):
		return securityFailure(brokers, err)
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		kind, name = "topic", names.topic
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		kind, name = "transactional id", names.txnID
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		kind, name = "group", names.group
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		// The only cluster operation the connector's requests need
		// is IDEMPOTENT_WRITE (InitProducerID without a transactional
		// id; Kafka also accepts WRITE on any topic instead).
		kind = "cluster"
		if op == opWrite {
			op = "IDEMPOTENT_WRITE"
		}
	default:
		return err
	}
	ae := &AuthorizationError{Resource: kind, Name: name, Operation: op, Brokers: brokers, Err: err}
	ae.Principal, ae.Mechanism = principalOf(cl)
	return ae
}

// saslUser is a SASL mechanism that remembers its user, so that
// authorization errors can name the principal.
type saslUser struct {
	sasl.Mechanism
	user string
}

// principalOf returns the principal ("User:<name>") of a client that
// authenticates with SASLPlain or SASLScram, or else the name of its SASL
// mechanism, if any.
func principalOf(cl *kgo.Client) (principal, mechanism string) {
	if cl == nil {
		return "", ""
	}
	mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	for _, m := range mechs {
		if u, ok := m.(saslUser); ok {
			return "User:" + u.user, u.Name()
		}
	}
	if len(mechs) > 0 {
		return "", mechs[0].Name()
	}
	return "", ""
}

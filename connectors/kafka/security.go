package kafka

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/restart"
)

// ErrSecurity is wrapped (by a *SecurityError) when the brokers refuse
// the client's credentials or the client refuses the brokers' TLS
// certificate.
var ErrSecurity = errors.New("kafka: TLS or SASL authentication failed")

// SecurityError is a connection the client's security settings cannot
// make: SASL authentication failed (wrong user or password, a mechanism
// the broker does not enable), the broker's certificate is not trusted
// (another CA, another host name, expired), or the broker closed the
// connection at its first read (franz-go's ErrFirstReadEOF: TLS to a
// plaintext listener, plaintext to a TLS one, no SASL where it is
// required; franz-go does not retry it either). Restarting does not fix it,
// so it matches restart.ErrUnrecoverable as well as [ErrSecurity]: the job
// fails at once. Its message names the brokers and the cause, never a
// secret.
type SecurityError struct {
	Brokers []string // the bootstrap brokers
	Err     error
}

func (e *SecurityError) Error() string {
	return fmt.Sprintf("%v on brokers %v (check %s): %v", ErrSecurity, e.Brokers, e.hint(), e.Err)
}

func (e *SecurityError) hint() string {
	var eof *kgo.ErrFirstReadEOF
	if errors.As(e.Err, &eof) {
		return "tls.enabled and sasl.mechanism against the brokers' listener"
	}
	if isTLSVerifyErr(e.Err) {
		return "tls.ca-file and tls.server-name"
	}
	return "sasl.mechanism, sasl.username and the password"
}

// Unwrap returns ErrSecurity, restart.ErrUnrecoverable and the cause.
func (e *SecurityError) Unwrap() []error {
	return []error{ErrSecurity, restart.ErrUnrecoverable, e.Err}
}

// securityFailure returns err as a *SecurityError when it is a SASL
// authentication failure or a TLS certificate the client does not trust,
// else err unchanged.
func securityFailure(brokers []string, err error) error {
	var se *SecurityError
	if err == nil || errors.As(err, &se) || !isSecurityErr(err) {
		return err
	}
	return &SecurityError{Brokers: brokers, Err: err}
}

// isSecurityErr reports a SASL authentication failure or a broker
// certificate the client does not accept.
func isSecurityErr(err error) bool {
	var alert tls.AlertError
	var eof *kgo.ErrFirstReadEOF
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) || isTLSVerifyErr(err) || errors.As(err, &alert) || errors.As(err, &eof)
}

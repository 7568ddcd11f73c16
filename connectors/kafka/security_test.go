package kafka

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/restart"
)

// TestSecurityFailureIsUnrecoverable: SASL authentication failures,
// untrusted certificates and franz-go's first-read EOF (TLS against a
// plaintext listener) become a *SecurityError that fails the job at once
// and names the brokers; a broker that is down or a connection cut later
// stays a transient error.
func TestSecurityFailureIsUnrecoverable(t *testing.T) {
	brokers := []string{"127.0.0.1:9093"}
	for _, err := range []error{
		fmt.Errorf("auth: %w", kerr.SaslAuthenticationFailed),
		kerr.UnsupportedSaslMechanism,
		fmt.Errorf("unable to dial: %w", x509.UnknownAuthorityError{}),
		&kgo.ErrFirstReadEOF{},
	} {
		for _, got := range []error{securityFailure(brokers, err), authzError(err, nil, brokers, opRead, resourceNames{})} {
			var se *SecurityError
			if !errors.As(got, &se) || !errors.Is(got, restart.ErrUnrecoverable) || !errors.Is(got, ErrSecurity) {
				t.Errorf("%v: got %v, want a *SecurityError that is unrecoverable", err, got)
				continue
			}
			if !strings.Contains(got.Error(), brokers[0]) || !strings.Contains(got.Error(), err.Error()) {
				t.Errorf("%q does not name the broker and the cause", got)
			}
		}
	}
	for _, err := range []error{io.EOF, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, kerr.NotLeaderForPartition} {
		if got := securityFailure(brokers, err); got != err || errors.Is(got, restart.ErrUnrecoverable) {
			t.Errorf("%v: got %v, want it unchanged", err, got)
		}
	}
}

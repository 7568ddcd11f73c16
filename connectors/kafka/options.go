package kafka

import (
	"crypto/tls"
	"regexp"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASLPlain returns the client option for SASL/PLAIN. Pass secrets from the
// environment; they are never logged. Authorization errors name the
// principal "User:<user>".
func SASLPlain(user, pass string) kgo.Opt {
	return kgo.SASL(saslUser{plain.Auth{User: user, Pass: pass}.AsMechanism(), user})
}

// SASLScram returns the client option for SASL/SCRAM-SHA-256 (sha512
// false) or SCRAM-SHA-512.
func SASLScram(user, pass string, sha512 bool) kgo.Opt {
	a := scram.Auth{User: user, Pass: pass}
	if sha512 {
		return kgo.SASL(saslUser{a.AsSha512Mechanism(), user})
	}
	return kgo.SASL(saslUser{a.AsSha256Mechanism(), user})
}

// TLS returns the client option that dials with TLS.
func TLS(c *tls.Config) kgo.Opt { return kgo.DialTLSConfig(c) }

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

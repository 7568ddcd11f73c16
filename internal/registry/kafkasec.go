package registry

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// SASL mechanisms of the sasl.mechanism option (Kafka's names).
const (
	saslNone        = "none"
	saslPlain       = "PLAIN"
	saslScram256    = "SCRAM-SHA-256"
	saslScram512    = "SCRAM-SHA-512"
	saslOAuthBearer = "OAUTHBEARER"
	saslAWSMSKIAM   = "AWS_MSK_IAM"
)

// DefaultTokenCommandTimeout is the default of sasl.token-command-timeout.
const DefaultTokenCommandTimeout = 10 * time.Second

// kafkaSecurityOptions are the security options of the Kafka source, the
// Kafka sink and so the Kafka dead-letter sink: one definition, added to
// each option list by withKafkaSecurity. Names are flat and dotted (the
// registry has no nested options); docs/cli.md maps them to Kafka's
// security.protocol, ssl.* and sasl.* settings.
var kafkaSecurityOptions = []Option{
	{Name: "tls.enabled", Type: Bool, Default: false, Description: "dial the brokers with TLS (Kafka's security.protocol SSL, or SASL_SSL with sasl.mechanism); the other tls.* options need it"},
	{Name: "tls.ca-file", Type: String, Default: "", Description: "PEM file of the CA certificates that sign the brokers' certificates; empty = the system's roots"},
	{Name: "tls.cert-file", Type: String, Default: "", Description: "PEM client certificate for mutual TLS (with tls.key-file); empty = none"},
	{Name: "tls.key-file", Type: String, Default: "", Description: "PEM private key of tls.cert-file; empty = none"},
	{Name: "tls.server-name", Type: String, Default: "", Description: "the name the brokers' certificates must carry; empty = each broker's host"},
	{Name: "tls.insecure-skip-verify", Type: Bool, Default: false, Description: "accept any broker certificate (no verification; logged as a WARN at every start); for tests only"},
	{Name: "sasl.mechanism", Type: Enum, Values: []string{saslNone, saslPlain, saslScram256, saslScram512, saslOAuthBearer, saslAWSMSKIAM}, Default: saslNone,
		Description: "SASL authentication (Kafka's sasl.mechanism); none = no SASL. AWS_MSK_IAM takes its credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN"},
	{Name: "sasl.username", Type: String, Default: "", Description: "user of PLAIN and SCRAM-SHA-256/512"},
	{Name: "sasl.password", Type: String, Default: "", Secret: true, Description: "password of PLAIN and SCRAM (use ${VAR}); never shown; or sasl.password-file"},
	{Name: "sasl.password-file", Type: String, Default: "", Description: "file holding the password (one trailing newline is dropped), read at every start; instead of sasl.password"},
	{Name: "sasl.token-file", Type: String, Default: "", Description: "OAUTHBEARER: file holding the token, read again whenever it changes (size or modification time); instead of sasl.token-command"},
	{Name: "sasl.token-command", Type: String, Default: "", Description: "OAUTHBEARER: command run by /bin/sh -c at every authentication; its standard output (trimmed) is the token"},
	{Name: "sasl.token-command-timeout", Type: Duration, Default: DefaultTokenCommandTimeout, Check: Positive, Description: "how long sasl.token-command may run before it is killed and the authentication fails"},
}

// withKafkaSecurity returns opts followed by the security options.
func withKafkaSecurity(opts []Option) []Option {
	return append(slices.Clip(opts), kafkaSecurityOptions...)
}

// validateKafkaSecurity checks the rules across the security options. Its
// errors name options, never values.
func validateKafkaSecurity(o Options) error {
	var errs []error
	if !o.Bool("tls.enabled") {
		for _, n := range []string{"tls.ca-file", "tls.cert-file", "tls.key-file", "tls.server-name"} {
			if o.String(n) != "" {
				errs = append(errs, fmt.Errorf("%s is set but tls.enabled is false (set tls.enabled: true)", n))
			}
		}
		if o.Bool("tls.insecure-skip-verify") {
			errs = append(errs, errors.New("tls.insecure-skip-verify is set but tls.enabled is false (set tls.enabled: true)"))
		}
	}
	if (o.String("tls.cert-file") == "") != (o.String("tls.key-file") == "") {
		errs = append(errs, errors.New("tls.cert-file and tls.key-file go together: set both or neither"))
	}
	if o.Bool("tls.insecure-skip-verify") && o.String("tls.ca-file") != "" {
		errs = append(errs, errors.New("tls.insecure-skip-verify turns off the verification that tls.ca-file is for: set one of them"))
	}
	mech := o.String("sasl.mechanism")
	set := func(n string) bool { return o.String(n) != "" }
	allowed := map[string][]string{
		saslNone:        nil,
		saslPlain:       {"sasl.username", "sasl.password", "sasl.password-file"},
		saslScram256:    {"sasl.username", "sasl.password", "sasl.password-file"},
		saslScram512:    {"sasl.username", "sasl.password", "sasl.password-file"},
		saslOAuthBearer: {"sasl.token-file", "sasl.token-command"},
		saslAWSMSKIAM:   nil,
	}[mech]
	for _, n := range []string{"sasl.username", "sasl.password", "sasl.password-file", "sasl.token-file", "sasl.token-command"} {
		if set(n) && !slices.Contains(allowed, n) {
			errs = append(errs, fmt.Errorf("%s is not used with sasl.mechanism %s", n, mech))
		}
	}
	switch mech {
	case saslPlain, saslScram256, saslScram512:
		if !set("sasl.username") {
			errs = append(errs, fmt.Errorf("sasl.mechanism %s needs sasl.username", mech))
		}
		if set("sasl.password") == set("sasl.password-file") {
			errs = append(errs, fmt.Errorf("sasl.mechanism %s needs one of sasl.password and sasl.password-file", mech))
		}
	case saslOAuthBearer:
		if set("sasl.token-file") == set("sasl.token-command") {
			errs = append(errs, errors.New("sasl.mechanism OAUTHBEARER needs one of sasl.token-file and sasl.token-command"))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: %s", kafka.ErrInvalidConfig, strings.Join(msgs, "; "))
}

// kafkaSecurity returns the franz-go client options that o's security
// options ask for (none by default). It reads the CA, certificate, key and
// password files, so their errors show at start, naming the file and not
// its content; it warns on log when verification is off or a password
// would go over plaintext.
func kafkaSecurity(o Options, log *slog.Logger) ([]kgo.Opt, error) {
	if err := validateKafkaSecurity(o); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	var opts []kgo.Opt
	if o.Bool("tls.enabled") {
		cfg, err := kafkaTLSConfig(o)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", kafka.ErrInvalidConfig, err)
		}
		if cfg.InsecureSkipVerify {
			log.Warn("kafka: tls.insecure-skip-verify is set: broker certificates are not verified, anyone between here and the brokers can read and change the traffic")
		}
		opts = append(opts, kafka.TLS(cfg))
	}
	mech := o.String("sasl.mechanism")
	switch mech {
	case saslPlain, saslScram256, saslScram512:
		pass, err := kafkaPassword(o)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", kafka.ErrInvalidConfig, err)
		}
		user := o.String("sasl.username")
		if mech == saslPlain {
			if !o.Bool("tls.enabled") {
				log.Warn("kafka: sasl.mechanism PLAIN without tls.enabled sends the password in clear text")
			}
			opts = append(opts, kafka.SASLPlain(user, pass))
		} else {
			opts = append(opts, kafka.SASLScram(user, pass, mech == saslScram512))
		}
	case saslOAuthBearer:
		var src tokenSource
		if f := o.String("sasl.token-file"); f != "" {
			src = &tokenFile{path: f}
		} else {
			src = tokenCommand{cmd: o.String("sasl.token-command"), timeout: o.Duration("sasl.token-command-timeout")}
		}
		opts = append(opts, kgo.SASL(oauthMechanism(src)))
	case saslAWSMSKIAM:
		if _, err := awsCredentials(); err != nil {
			return nil, fmt.Errorf("%w: %w", kafka.ErrInvalidConfig, err)
		}
		opts = append(opts, kgo.SASL(awsMechanism()))
	}
	return opts, nil
}

// oauthMechanism is OAUTHBEARER with a token from src at every
// authentication.
func oauthMechanism(src tokenSource) sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := src.token(ctx)
		if err != nil {
			return oauth.Auth{}, fmt.Errorf("OAUTHBEARER token: %w", err)
		}
		return oauth.Auth{Token: tok}, nil
	})
}

// awsMechanism is AWS_MSK_IAM with the credentials of the environment at
// every authentication.
func awsMechanism() sasl.Mechanism {
	return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) { return awsCredentials() })
}

// kafkaTLSConfig builds the TLS configuration of the tls.* options.
func kafkaTLSConfig(o Options) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.String("tls.server-name"),
		InsecureSkipVerify: o.Bool("tls.insecure-skip-verify")} //nolint:gosec // only when set explicitly, and warned about
	if f := o.String("tls.ca-file"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("tls.ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca-file %s: no PEM certificate in it", f)
		}
		cfg.RootCAs = pool
	}
	if cf, kf := o.String("tls.cert-file"), o.String("tls.key-file"); cf != "" {
		cert, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			// The error of LoadX509KeyPair names what is wrong, not the key.
			return nil, fmt.Errorf("tls.cert-file %s and tls.key-file %s: %w", cf, kf, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// kafkaPassword returns sasl.password, or the content of
// sasl.password-file without one trailing newline.
func kafkaPassword(o Options) (string, error) {
	f := o.String("sasl.password-file")
	if f == "" {
		return o.String("sasl.password"), nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("sasl.password-file: %w", err)
	}
	p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if p == "" {
		return "", fmt.Errorf("sasl.password-file %s is empty", f)
	}
	return p, nil
}

// awsCredentials reads the AWS credentials of AWS_MSK_IAM from the
// environment at every authentication, so rotated session credentials are
// picked up by new connections.
func awsCredentials() (aws.Auth, error) {
	a := aws.Auth{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: os.Getenv("AWS_SESSION_TOKEN"), UserAgent: "sluice"}
	if a.AccessKey == "" || a.SecretKey == "" {
		return aws.Auth{}, errors.New("sasl.mechanism AWS_MSK_IAM needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment (and AWS_SESSION_TOKEN for temporary credentials)")
	}
	return a, nil
}

// tokenSource gives the OAUTHBEARER token for an authentication.
type tokenSource interface {
	token(ctx context.Context) (string, error)
}

// tokenFile reads the token from a file, again whenever the file's size
// or modification time changes (a sidecar that refreshes it).
type tokenFile struct {
	path string

	mu    sync.Mutex
	size  int64
	mod   time.Time
	value string
}

func (f *tokenFile) token(context.Context) (string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("sasl.token-file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.value != "" && st.Size() == f.size && st.ModTime().Equal(f.mod) {
		return f.value, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("sasl.token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("sasl.token-file %s is empty", f.path)
	}
	f.size, f.mod, f.value = st.Size(), st.ModTime(), tok
	return tok, nil
}

// tokenCommand runs a command for every token, killed after timeout; its
// standard output, trimmed, is the token. Its error names the command and
// how it failed, with the start of its standard error, never its output.
type tokenCommand struct {
	cmd     string
	timeout time.Duration
}

func (c tokenCommand) token(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c.cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &limitedBuffer{b: &stderr, max: 512}
	cmd.WaitDelay = time.Second // a child holding the pipes open does not hold us
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("sasl.token-command %q: killed after sasl.token-command-timeout %v", c.cmd, c.timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return "", fmt.Errorf("sasl.token-command %q: %w: %s", c.cmd, err, msg)
		}
		return "", fmt.Errorf("sasl.token-command %q: %w", c.cmd, err)
	}
	tok := strings.TrimSpace(stdout.String())
	if tok == "" {
		return "", fmt.Errorf("sasl.token-command %q: printed no token", c.cmd)
	}
	return tok, nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

package srtest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"testing"
)

// Env is the environment variable that holds the registry's base URL, the
// Confluent-compatible API root (for Apicurio Registry,
// http://127.0.0.1:PORT/apis/ccompat/v7).
const Env = "SLUICE_SCHEMA_REGISTRY"

// URL returns the base URL of the test schema registry ($SLUICE_SCHEMA_REGISTRY,
// without a trailing slash). When it is unset the test is skipped with a
// message that says how to start one.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		t.Skipf("%s is not set: start a schema registry with `eval \"$(scripts/schema-registry.sh start)\"` "+
			"(and `scripts/schema-registry.sh stop` afterwards) to run this against Apicurio Registry's Confluent-compatible API", Env)
	}
	for len(u) > 0 && u[len(u)-1] == '/' {
		u = u[:len(u)-1]
	}
	return u
}

var unsafeSubject = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Subject returns a subject name no other test uses: the test's name, a
// random suffix and then suffix (for example "-value"). Every package's
// tests share one registry and go test runs packages at once, so a test
// that registers schemas names its subjects with Subject (or its topics
// with a random part, for the topic-name strategy).
func Subject(t testing.TB, suffix string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("srtest: random subject suffix: %v", err)
	}
	name := unsafeSubject.ReplaceAllString(t.Name(), "_")
	if len(name) > 80 {
		name = name[:80]
	}
	return name + "-" + hex.EncodeToString(b[:]) + suffix
}

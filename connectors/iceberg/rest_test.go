package iceberg

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/sluice-io/sluice/connectortest"
)

// The REST catalog tests run the sink against Apache Iceberg's own REST
// catalog server (scripts/iceberg-rest.sh: RESTCatalogServer from
// iceberg-open-api's test fixtures, a JdbcCatalog on SQLite behind it, a
// file:// warehouse) at $SLUICE_ICEBERG_REST; they skip without it.

// restBackend is a fresh namespace (so a fresh table location) in the
// REST catalog at $SLUICE_ICEBERG_REST.
func restBackend(t *testing.T) (Catalog, table.Identifier) {
	t.Helper()
	uri := os.Getenv("SLUICE_ICEBERG_REST")
	if uri == "" {
		t.Skip("SLUICE_ICEBERG_REST is not set (start a REST catalog with scripts/iceberg-rest.sh)")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return RESTCatalog("rest", uri, "", nil), table.Identifier{"t" + hex.EncodeToString(b[:]), "events"}
}

func TestRESTExactlyOnceUnderFailures(t *testing.T) {
	testExactlyOnceUnderFailures(t, restBackend)
}

func TestRESTSkipsCommittedCheckpoint(t *testing.T) {
	testSkipsCommittedCheckpoint(t, restBackend)
}

func TestRESTRetriesConflictingCommit(t *testing.T) {
	testRetriesConflictingCommit(t, restBackend)
}

func TestRESTConformance(t *testing.T) {
	if os.Getenv("SLUICE_ICEBERG_REST") == "" {
		t.Skip("SLUICE_ICEBERG_REST is not set (start a REST catalog with scripts/iceberg-rest.sh)")
	}
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
		cat, ident := restBackend(t)
		return &confContext{cat: cat, ident: ident, g: s.Guarantee}, nil
	}, connectortest.Guarantees(connectortest.ExactlyOnce), connectortest.Unordered())
}

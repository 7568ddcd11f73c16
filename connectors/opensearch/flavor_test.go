package opensearch

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestFlavor: FlavorAuto picks the client library by the node's answer;
// FlavorElasticsearch refuses a node that is not Elasticsearch with an
// error that says so; the names parse.
func TestFlavor(t *testing.T) {
	for _, s := range []string{"auto", "opensearch", "elasticsearch"} {
		f, err := ParseFlavor(s)
		if err != nil || f.String() != s {
			t.Errorf("ParseFlavor(%q) = %v, %v", s, f, err)
		}
	}
	if _, err := ParseFlavor("solr"); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "allowed: auto, opensearch, elasticsearch") {
		t.Errorf("ParseFlavor(solr): %v", err)
	}
	want := map[string]Flavor{"opensearch": FlavorOpenSearch, "elasticsearch": FlavorElasticsearch}
	forEachNode(t, func(t *testing.T, base string) {
		name := t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]
		cfg := defaultConnConfig()
		cfg.urls, _ = parseURLs([]string{base})
		cl, err := newClient(t.Context(), &cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.close()
		if err := cl.ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		if cl.flavor != want[name] {
			t.Errorf("auto flavor on the %s node: %v", name, cl.flavor)
		}
		if _, ok := cl.be.(*esBackend); ok != (want[name] == FlavorElasticsearch) {
			t.Errorf("backend %T for flavor %v", cl.be, cl.flavor)
		}
	})
	t.Run("elasticsearch-flavor-on-opensearch", func(t *testing.T) {
		base := os.Getenv("SLUICE_OPENSEARCH_URL")
		if base == "" {
			t.Skip("SLUICE_OPENSEARCH_URL is not set")
		}
		cfg := defaultConnConfig()
		cfg.urls, _ = parseURLs([]string{base})
		cfg.flavor, cfg.maxTries = FlavorElasticsearch, 1
		cl, err := newClient(t.Context(), &cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.close()
		_, err = cl.be.bulk(t.Context(), []byte("{\"index\":{\"_index\":\"flavor-x\",\"_id\":\"1\"}}\n{}\n"), "")
		if !errors.Is(err, ErrRequestFailed) || !strings.Contains(err.Error(), "is not Elasticsearch") || !strings.Contains(err.Error(), "flavor opensearch or auto") {
			t.Errorf("go-elasticsearch against OpenSearch: %v", err)
		}
	})
}

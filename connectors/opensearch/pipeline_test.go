package opensearch

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/sink"
)

// TestIngestPipeline: Action.Pipeline reaches the node. On every node: a
// document sent through an existing pipeline without processors is
// stored, and one sent through a pipeline that does not exist is
// rejected with an *ItemError naming the pipeline. Where the node has
// the ingest-common processors (not in the integration-test
// distributions of OpenSearch 2.19.6 and Elasticsearch 8.19.21, whose
// module is not published on Maven Central): a set and a rename
// processor change the stored document; skipped with the reason
// elsewhere.
func TestIngestPipeline(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		index := uniqueIndex("ingest")
		if err := a.createIndex(index, nil); err != nil {
			t.Fatal(err)
		}
		defer a.deleteIndex(index)
		write := func(t *testing.T, pipeline string, ids ...int) error {
			doc := func(v int, _ sink.Meta) (Action, error) {
				return Action{Index: index, ID: fmt.Sprint(v), Pipeline: pipeline, Doc: fmt.Appendf(nil, `{"v":%d,"name":"n%d"}`, v, v)}, nil
			}
			w, _ := newWriter(t, base, doc, MaxTries(2))
			for _, v := range ids {
				if err := w.Write(t.Context(), v, sink.Meta{}); err != nil {
					return err
				}
			}
			return w.Flush(t.Context(), true)
		}
		stored := func(t *testing.T, id string) map[string]any {
			data, err := a.must(http.MethodGet, "/"+index+"/_doc/"+id, nil)
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Source map[string]any `json:"_source"`
			}
			if err := json.Unmarshal(data, &d); err != nil {
				t.Fatal(err)
			}
			return d.Source
		}

		empty := uniqueIndex("pl-empty")
		if _, err := a.must(http.MethodPut, "/_ingest/pipeline/"+empty, `{"description": "sluice test", "processors": []}`); err != nil {
			t.Fatal(err)
		}
		defer a.req(http.MethodDelete, "/_ingest/pipeline/"+empty, nil)
		if err := write(t, empty, 1, 2); err != nil {
			t.Fatalf("through an empty pipeline: %v", err)
		}
		if got := stored(t, "1"); fmt.Sprint(got) != fmt.Sprint(map[string]any{"v": float64(1), "name": "n1"}) {
			t.Errorf("document 1 through an empty pipeline: %v", got)
		}

		err := write(t, "no-such-pipeline-x", 3)
		var ie *ItemError
		if !errors.As(err, &ie) || ie.ID != "3" || !strings.Contains(ie.Error(), "no-such-pipeline-x") {
			t.Errorf("through a missing pipeline: %v, want an item error naming the pipeline", err)
		}

		proc := uniqueIndex("pl-set")
		body := `{"processors": [{"set": {"field": "via", "value": "pipeline"}}, {"rename": {"field": "name", "target_field": "renamed"}}]}`
		data, status, err := a.req(http.MethodPut, "/_ingest/pipeline/"+proc, body)
		if err != nil {
			t.Fatal(err)
		}
		if status >= 300 {
			if strings.Contains(string(data), "No processor type exists") {
				t.Skipf("the node has no set/rename processors (no ingest-common module): %s", errorSummary(data))
			}
			t.Fatalf("create pipeline: status %d: %s", status, data)
		}
		defer a.req(http.MethodDelete, "/_ingest/pipeline/"+proc, nil)
		if err := write(t, proc, 4); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, "4"); fmt.Sprint(got) != fmt.Sprint(map[string]any{"v": float64(4), "renamed": "n4", "via": "pipeline"}) {
			t.Errorf("document 4 through the set/rename pipeline: %v", got)
		}
	})
}

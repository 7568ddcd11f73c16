package opensearch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/opensearch"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

type event struct {
	ID   string `json:"id"`
	User string `json:"user"`
	At   int64  `json:"at"` // event time, ms since the epoch
}

// Example indexes events exactly once into daily indexes named by their
// event time. Every action has an id, so a replay after a failure
// rewrites the same documents. It runs against a stand-in for a node
// that prints the action lines of the bulk requests it gets; pass a real
// node's URL (http://127.0.0.1:9200) the same way.
func Example() {
	node := newPrintingNode()
	defer node.Close()

	daily, err := opensearch.ParseIndexPattern("events-{yyyy.MM.dd}")
	if err != nil {
		fmt.Println(err)
		return
	}
	snk, err := opensearch.NewSink([]string{node.URL}, func(e event, m sink.Meta) (opensearch.Action, error) {
		doc, err := json.Marshal(e)
		return opensearch.Action{Index: daily.FormatMillis(e.At), ID: e.ID, Doc: doc}, err
	}, opensearch.BulkActions(500), opensearch.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}

	day := time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC).UnixMilli()
	gen := datagen.New(func(k int64) event {
		return event{ID: fmt.Sprintf("e-%d", k), User: fmt.Sprintf("u%d", k%2), At: day + k*1000}
	}, datagen.Count(3))
	env := stream.New(stream.CheckpointEvery(100*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[event](), "events"), snk, "opensearch")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx, "events"); err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range node.lines() {
		fmt.Println(l)
	}
	// Output:
	// {"index":{"_index":"events-2026.12.01","_id":"e-0"}}
	// {"index":{"_index":"events-2026.12.02","_id":"e-1"}}
	// {"index":{"_index":"events-2026.12.02","_id":"e-2"}}
}

// printingNode answers like a node and keeps the action lines of the
// bulk requests.
type printingNode struct {
	*httptest.Server
	mu      sync.Mutex
	actions []string
}

func newPrintingNode() *printingNode {
	n := &printingNode{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/_bulk" {
			fmt.Fprint(w, `{"version":{"number":"2.19.6"}}`)
			return
		}
		sc := bufio.NewScanner(r.Body)
		var items []string
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), `{"index":`) {
				n.mu.Lock()
				n.actions = append(n.actions, sc.Text())
				n.mu.Unlock()
				items = append(items, `{"index":{"status":201}}`)
			}
		}
		fmt.Fprintf(w, `{"errors":false,"items":[%s]}`, strings.Join(items, ","))
	}))
	return n
}

func (n *printingNode) lines() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Sorted(slices.Values(n.actions))
}

package httpsource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/examples/httpsource"
	"github.com/sluice-io/sluice/source"
	"go.uber.org/goleak"
)

// pageSize is the most items a page holds, as real APIs limit theirs.
const pageSize = 300

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is the external system: one growing list of items per split,
// served a page at a time at /split/<i>?cursor=c. A cursor is "at-<n>", the
// index of the page's first item ("" is the start).
type server struct {
	settings connectortest.SourceSettings
	srv      *httptest.Server
	mu       sync.Mutex
	items    [][]string
}

func newServer(s connectortest.SourceSettings) *server {
	sv := &server{settings: s, items: make([][]string, s.Splits)}
	sv.srv = httptest.NewServer(http.HandlerFunc(sv.serve))
	return sv
}

func (sv *server) serve(w http.ResponseWriter, r *http.Request) {
	i, err1 := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/split/"))
	from, err2 := 0, error(nil)
	if c := r.URL.Query().Get("cursor"); c != "" {
		from, err2 = strconv.Atoi(strings.TrimPrefix(c, "at-"))
	}
	if err1 != nil || err2 != nil || i < 0 || i >= len(sv.items) || from < 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	sv.mu.Lock()
	items := sv.items[i][min(from, len(sv.items[i])):]
	items = slices.Clone(items[:min(len(items), pageSize)])
	sv.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(httpsource.Page{Items: items, Next: "at-" + strconv.Itoa(from+len(items))})
}

func (sv *server) Write(split int, recs []connectortest.Record) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	for _, r := range recs {
		sv.items[split] = append(sv.items[split], r.String())
	}
	return nil
}

func (sv *server) Source() (source.Source[string, httpsource.Split, []httpsource.Split], error) {
	urls := make([]string, sv.settings.Splits)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/split/%d", sv.srv.URL, i)
	}
	b := source.ContinuousUnbounded
	if sv.settings.Bounded {
		b = source.Bounded
	}
	src := httpsource.New(urls, b)
	src.PollInterval = 10 * time.Millisecond
	return src, nil
}

func (sv *server) Record(item string) (connectortest.Record, error) {
	return connectortest.ParseRecord(item)
}

func (sv *server) Close() error {
	sv.srv.Close()
	return nil
}

func TestConformance(t *testing.T) {
	connectortest.TestSource(t, func(s connectortest.SourceSettings) (connectortest.SourceContext[string, httpsource.Split, []httpsource.Split], error) {
		return newServer(s), nil
	})
}

// poll runs PollNext until want records arrived or the input ended,
// waiting on Available in between (bounded in time).
func poll(t *testing.T, r source.Reader[string, httpsource.Split], out *fakes.Output[string], want int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for len(out.Records) < want {
		st, err := r.PollNext(out)
		if err != nil {
			t.Fatal(err)
		}
		switch st {
		case source.EndOfInput:
			return
		case source.NothingAvailable:
			select {
			case <-r.Available():
			case <-deadline:
				t.Fatalf("timed out with %d of %d records", len(out.Records), want)
			}
		}
	}
}

// TestResumesMidStream checks that a split's position is the cursor after
// the last whole page emitted, and that a reader given that split reads
// on from there: every item once, none twice.
func TestResumesMidStream(t *testing.T) {
	const n = 2*pageSize + 50
	sv := newServer(connectortest.SourceSettings{Bounded: true, Splits: 1})
	defer sv.Close()
	var recs []connectortest.Record
	for i := range n {
		recs = append(recs, connectortest.Record{Split: 0, Seq: int64(i), Payload: "p" + strconv.Itoa(i)})
	}
	if err := sv.Write(0, recs); err != nil {
		t.Fatal(err)
	}
	src, err := sv.Source()
	if err != nil {
		t.Fatal(err)
	}
	read := func(from httpsource.Split, want int) ([]string, httpsource.Split) {
		r, err := src.CreateReader(&fakes.ReaderContext{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := r.AddSplits([]httpsource.Split{from}); err != nil {
			t.Fatal(err)
		}
		r.NotifyNoMoreSplits()
		var out fakes.Output[string]
		poll(t, r, &out, want)
		st, err := r.SnapshotState(1)
		if err != nil {
			t.Fatal(err)
		}
		var sp httpsource.Split
		if len(st) == 1 {
			sp = st[0]
		}
		return out.Values(), sp
	}
	first, sp := read(httpsource.Split{URL: sv.srv.URL + "/split/0"}, 1)
	if len(first) != pageSize || sp.Cursor != "at-"+strconv.Itoa(pageSize) {
		t.Fatalf("after the first poll: %d items, position %+v; want one whole page of %d and cursor at-%d", len(first), sp, pageSize, pageSize)
	}
	rest, _ := read(sp, n)
	got := append(first, rest...)
	for i, v := range got {
		if want := recs[i].String(); v != want {
			t.Fatalf("item %d is %q, want %q (%d items)", i, v, want, len(got))
		}
	}
	if len(got) != n {
		t.Fatalf("read %d items, want %d", len(got), n)
	}
}

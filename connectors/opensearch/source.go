package opensearch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
	"github.com/sluice-io/sluice/source/readerbase"
)

// Hit is one document the source read.
type Hit struct {
	// Index is the index the document is in (useful with a pattern).
	Index string
	// ID is the document id.
	ID string
	// Source is the document's _source as raw JSON (nil if the source
	// was excluded with [SourceFields]).
	Source json.RawMessage
	// Sort is the hit's sort values: its position in its slice.
	Sort []json.RawMessage
}

// Split is one slice of the point-in-time search; its position is the
// sort values of the last hit emitted.
type Split struct {
	PIT    string            `json:"pit"`
	Slice  int               `json:"slice"`
	Slices int               `json:"slices"`
	After  []json.RawMessage `json:"after,omitempty"`
}

// SplitID returns "slice-<n>".
func (s Split) SplitID() string { return "slice-" + strconv.Itoa(s.Slice) }

// sourceConfig configures a source.
type sourceConfig struct {
	conn      connConfig
	slices    int
	pageSize  int
	keepAlive time.Duration
	query     json.RawMessage
	fields    []string
	noSource  bool
}

// SourceOption configures a source; see the functions that return one.
type SourceOption interface{ applySource(*sourceConfig) }

type sourceOptionFunc func(*sourceConfig)

func (f sourceOptionFunc) applySource(c *sourceConfig) { f(c) }

// Slices sets the number of slices, and so of splits (default 4). More
// slices than readers is fine: readers take the next one when done.
func Slices(n int) SourceOption { return sourceOptionFunc(func(c *sourceConfig) { c.slices = n }) }

// PageSize sets the hits per search request (default 1000; at most the
// index's max_result_window, 10000 by default).
func PageSize(n int) SourceOption { return sourceOptionFunc(func(c *sourceConfig) { c.pageSize = n }) }

// KeepAlive sets how long the point in time lives without a search
// (default 10m; every page renews it). A job restored after it expired
// cannot resume and fails with an error saying so.
func KeepAlive(d time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.keepAlive = d })
}

// Query restricts the hits to a query in OpenSearch's query DSL, as JSON
// (default: every document, match_all).
func Query(q json.RawMessage) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.query = q })
}

// SourceFields limits each hit's Source to these fields; with none, hits
// carry no Source (default: the whole _source).
func SourceFields(fields ...string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.fields, c.noSource = fields, len(fields) == 0 })
}

// Source reads an index, an alias or a pattern once, as of the moment
// [NewSource] opened a point in time: later writes are not seen. It is
// bounded. Each slice of the point in time is a split, read in pages
// sorted by (_doc, _id) with search_after, so a restored split resumes
// after its last emitted hit.
type Source struct {
	enumerate.FixedSplits[Split]
	cfg   sourceConfig
	index string
	pit   string
}

var _ source.Source[Hit, Split, []Split] = (*Source)(nil)

// NewSource opens a point in time on index (a name, an alias, a
// comma-separated list or a pattern) and returns a source of its
// documents. The point in time expires KeepAlive after the last page
// read; [Source.Close] deletes it at once.
func NewSource(ctx context.Context, urls []string, index string, opts ...SourceOption) (*Source, error) {
	c := sourceConfig{conn: defaultConnConfig(), slices: 4, pageSize: 1000, keepAlive: 10 * time.Minute}
	for _, o := range opts {
		o.applySource(&c)
	}
	var err error
	if c.conn.urls, err = parseURLs(urls); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: source: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case index == "":
		return nil, bad("no index")
	case c.slices < 1 || c.slices > 1024:
		return nil, bad("Slices is %d; allowed: 1 to 1024", c.slices)
	case c.pageSize < 1 || c.pageSize > 10000:
		return nil, bad("PageSize is %d; allowed: 1 to 10000", c.pageSize)
	case c.keepAlive < time.Second:
		return nil, bad("KeepAlive is %v; must be at least 1s", c.keepAlive)
	case c.query != nil && !json.Valid(c.query):
		return nil, bad("Query is not valid JSON")
	}
	if err := c.conn.validate("source"); err != nil {
		return nil, err
	}
	cl, err := newClient(ctx, &c.conn)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	if err := cl.ping(ctx); err != nil {
		return nil, fmt.Errorf("opensearch source: %w", err)
	}
	c.conn.flavor = cl.flavor // the readers need not ask again
	var pit string
	err = cl.retry(ctx, "opensearch source: open a point in time on "+strconv.Quote(index), nil, func() error {
		var err error
		pit, err = cl.be.openPIT(ctx, index, keepAliveString(c.keepAlive))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opensearch source: opening a point in time on %q: %w", index, err)
	}
	s := &Source{cfg: c, index: index, pit: pit}
	for i := range c.slices {
		s.Splits = append(s.Splits, Split{PIT: pit, Slice: i, Slices: c.slices})
	}
	return s, nil
}

func keepAliveString(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1000), 10) + "ms"
}

// Close deletes the point in time. Call it once no job needs the source
// any more (a job restored later cannot resume without it); without it,
// the point in time expires KeepAlive after the last page read.
func (s *Source) Close(ctx context.Context) error {
	cl, err := newClient(ctx, &s.cfg.conn)
	if err != nil {
		return err
	}
	defer cl.close()
	if cl.be == nil {
		if err := cl.ping(ctx); err != nil {
			return err
		}
	}
	err = cl.be.closePIT(ctx, s.pit)
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusNotFound {
		return nil
	}
	return err
}

// SplitSerializer stores a split as JSON, version 1.
func (s *Source) SplitSerializer() serde.Versioned[Split] { return serde.JSON[Split](1) }

// page is one search response of one slice.
type page struct {
	hits  []Hit
	after []json.RawMessage
	pit   string // a new point-in-time id, if the search returned one
}

// CreateReader returns a reader whose elements are whole pages, so a
// split's state is always the sort values of a page's last hit.
func (s *Source) CreateReader(ctx source.ReaderContext) (source.Reader[Hit, Split], error) {
	return readerbase.New(ctx, readerbase.Config[page, Hit, Split, *Split]{
		NewSplitReader: func() (readerbase.SplitReader[page, Split], error) {
			return &sliceReader{s: s}, nil
		},
		Emitter: readerbase.EmitterFunc[page, Hit, *Split](func(p page, out source.Output[Hit], sp *Split) error {
			for _, h := range p.hits {
				out.Collect(h)
			}
			if p.after != nil {
				sp.After = p.after
			}
			if p.pit != "" {
				sp.PIT = p.pit
			}
			return nil
		}),
	}, readerbase.FetcherPerSplit(), readerbase.PullSplits())
}

// sliceReader reads one slice, a page per Fetch.
type sliceReader struct {
	s     *Source
	split Split
	cl    *client
}

func (r *sliceReader) AddSplits(splits []Split) error {
	r.split = splits[0]
	return nil
}

func (r *sliceReader) Close() error {
	if r.cl != nil {
		r.cl.close()
	}
	return nil
}

type searchHit struct {
	Index  string            `json:"_index"`
	ID     string            `json:"_id"`
	Source json.RawMessage   `json:"_source"`
	Sort   []json.RawMessage `json:"sort"`
}

func (r *sliceReader) body() ([]byte, error) {
	c := &r.s.cfg
	b := map[string]any{
		"size":             c.pageSize,
		"pit":              map[string]any{"id": r.split.PIT, "keep_alive": keepAliveString(c.keepAlive)},
		"sort":             r.cl.be.pitSort(),
		"track_total_hits": false,
	}
	if r.split.Slices > 1 {
		b["slice"] = map[string]int{"id": r.split.Slice, "max": r.split.Slices}
	}
	if r.split.After != nil {
		b["search_after"] = r.split.After
	}
	if c.query != nil {
		b["query"] = c.query
	}
	if c.noSource {
		b["_source"] = false
	} else if c.fields != nil {
		b["_source"] = c.fields
	}
	return json.Marshal(b)
}

func (r *sliceReader) Fetch(ctx context.Context) (readerbase.Batch[page], error) {
	var b readerbase.Batch[page]
	if r.cl == nil {
		cl, err := newClient(ctx, &r.s.cfg.conn)
		if err != nil {
			return b, err
		}
		r.cl = cl
		if cl.be == nil { // a Source not made by NewSource
			if err := cl.ping(ctx); err != nil {
				return b, fmt.Errorf("opensearch source: %w", err)
			}
		}
	}
	body, err := r.body()
	if err != nil {
		return b, err
	}
	var data []byte
	what := fmt.Sprintf("opensearch source: search slice %d of %d of %q", r.split.Slice, r.split.Slices, r.s.index)
	err = r.cl.retry(ctx, what, nil, func() error {
		var err error
		data, err = r.cl.be.search(ctx, body)
		return err
	})
	if err != nil {
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusNotFound || strings.Contains(err.Error(), "search_context_missing") {
			return b, fmt.Errorf("%s: the point in time is gone (expired after KeepAlive %v without a search, or deleted): the source cannot resume; start a fresh job: %w", what, r.s.cfg.keepAlive, err)
		}
		return b, fmt.Errorf("%s: %w", what, err)
	}
	var resp struct {
		PIT    string `json:"pit_id"`
		Shards struct {
			Failures []json.RawMessage `json:"failures"`
		} `json:"_shards"`
		Hits struct {
			Hits []searchHit `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return b, fmt.Errorf("%s: the response does not parse: %w", what, err)
	}
	if len(resp.Shards.Failures) > 0 {
		// A partial page would skip documents for good.
		return b, fmt.Errorf("%s: %d shard(s) failed: %s", what, len(resp.Shards.Failures), bytes.TrimSpace(resp.Shards.Failures[0]))
	}
	p := page{hits: make([]Hit, len(resp.Hits.Hits))}
	for i, h := range resp.Hits.Hits {
		p.hits[i] = Hit(h)
	}
	if n := len(p.hits); n > 0 {
		p.after = p.hits[n-1].Sort
		r.split.After = p.after
		if resp.PIT != "" && resp.PIT != r.split.PIT {
			// Elasticsearch may answer with a new id: the next search
			// must use it.
			p.pit = resp.PIT
			r.split.PIT = resp.PIT
		}
	}
	id := r.split.SplitID()
	b.Records = []readerbase.SplitRecords[page]{{SplitID: id, Records: []page{p}}}
	if len(p.hits) < r.s.cfg.pageSize {
		b.Finished = []string{id}
	}
	return b, nil
}

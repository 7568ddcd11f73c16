package httpsource

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
	"github.com/sluice-io/sluice/source/readerbase"
)

// Split is one endpoint and the cursor of its next page: its position.
type Split struct {
	URL    string `json:"url"`
	Cursor string `json:"cursor,omitempty"`
}

// SplitID returns the endpoint's URL.
func (s Split) SplitID() string { return s.URL }

// Page is one response: the items after the cursor asked for, and the next cursor.
type Page struct {
	Items []string `json:"items"`
	Next  string   `json:"next"`
}

// Source reads endpoints with http.DefaultClient; FixedSplits supplies all but the reader.
type Source struct {
	enumerate.FixedSplits[Split]
	PollInterval time.Duration // unbounded: wait after an empty page; default 100ms
}

// New returns a source of urls (without a query); bounded, it ends each at its first empty page.
func New(urls []string, b source.Boundedness) *Source {
	s := &Source{FixedSplits: enumerate.FixedSplits[Split]{Bound: b, Assign: []enumerate.Option[Split]{enumerate.RoundRobin[Split]()}}}
	for _, u := range urls {
		s.Splits = append(s.Splits, Split{URL: u})
	}
	return s
}

// CreateReader returns a reader whose elements are whole pages: a split's state is always a cursor.
func (s *Source) CreateReader(ctx source.ReaderContext) (source.Reader[string, Split], error) {
	return readerbase.New(ctx, readerbase.Config[Page, string, Split, *Split]{
		NewSplitReader: func() (readerbase.SplitReader[Page, Split], error) {
			return &fetcher{Source: s}, nil
		},
		Emitter: readerbase.EmitterFunc[Page, string, *Split](func(p Page, out source.Output[string], sp *Split) error {
			for _, it := range p.Items {
				out.Collect(it)
			}
			sp.Cursor = p.Next
			return nil
		}),
	}, readerbase.FetcherPerSplit())
}

// fetcher reads one split, a page per Fetch; its cursor runs ahead of the
// emitted one. Once ctx is done, readerbase ignores Fetch's error.
type fetcher struct {
	*Source
	Split
}

func (f *fetcher) AddSplits(splits []Split) error { f.Split = splits[0]; return nil }
func (f *fetcher) Close() error                   { http.DefaultClient.CloseIdleConnections(); return nil }

func (f *fetcher) Fetch(ctx context.Context) (b readerbase.Batch[Page], err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL+"?cursor="+url.QueryEscape(f.Cursor), nil)
	if err != nil {
		return b, fmt.Errorf("httpsource: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return b, fmt.Errorf("httpsource: %w", err)
	}
	defer resp.Body.Close()
	var p Page
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("httpsource: GET %s: %s", req.URL, resp.Status)
	} else if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return b, fmt.Errorf("httpsource: GET %s: %w", req.URL, err)
	}
	b.Records = []readerbase.SplitRecords[Page]{{SplitID: f.URL, Records: []Page{p}}}
	f.Cursor = p.Next
	if len(p.Items) == 0 && f.Bound == source.Bounded {
		b.Finished = []string{f.URL}
	} else if len(p.Items) == 0 { // nothing new yet: wait before asking again
		select {
		case <-ctx.Done():
		case <-time.After(cmp.Or(f.PollInterval, 100*time.Millisecond)):
		}
	}
	return b, nil
}

// Package httpsource is an example of a custom sluice source: it reads the
// lines of one or more HTTP endpoints, one split per endpoint, and resumes
// each at its line number after a failure. It is written against sluice's
// public API only and passes the connector conformance suite (see
// httpsource_test.go and docs/connector-howto.md).
//
// The endpoints speak a minimal tail protocol: GET <url>?from=n returns the
// lines from line n (0-based) on, possibly none yet, as text/plain.
package httpsource

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// Split is one endpoint and the number of the next line to read.
type Split struct {
	URL  string `json:"url"`
	Next int64  `json:"next"`
}

// SplitID returns the endpoint's URL.
func (s Split) SplitID() string { return s.URL }

// Source reads lines from endpoints. Bounded, a split ends at the first
// response without lines; unbounded, the reader polls every PollInterval.
type Source struct {
	URLs         []string
	Bounded      bool
	PollInterval time.Duration // unbounded only; default 100ms
	Client       *http.Client  // default: a client of its own per reader
}

var splitSerde = serde.JSON[Split](1)
var stateSerde = serde.JSON[[]Split](1)

func (s *Source) Boundedness() source.Boundedness {
	if s.Bounded {
		return source.Bounded
	}
	return source.ContinuousUnbounded
}

func (s *Source) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, []Split], error) {
	e := &enumerator{ctx: ctx, bounded: s.Bounded}
	for _, u := range s.URLs {
		e.pending = append(e.pending, Split{URL: u})
	}
	return e, nil
}

func (s *Source) RestoreEnumerator(ctx source.EnumeratorContext[Split], st []Split) (source.Enumerator[Split, []Split], error) {
	return &enumerator{ctx: ctx, bounded: s.Bounded, pending: st}, nil
}

func (s *Source) SplitSerializer() serde.Versioned[Split]             { return splitSerde }
func (s *Source) EnumeratorStateSerializer() serde.Versioned[[]Split] { return stateSerde }

// CreateReader returns a readerbase reader: a fetcher goroutine does the
// HTTP requests, the emitter counts lines on the task goroutine.
func (s *Source) CreateReader(ctx source.ReaderContext) (source.Reader[string, Split], error) {
	return readerbase.New(ctx, readerbase.Config[string, string, Split, *Split]{
		NewSplitReader: func() (readerbase.SplitReader[string, Split], error) {
			c := s.Client
			if c == nil {
				c = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
			}
			return &fetcher{s: s, client: c}, nil
		},
		Emitter: readerbase.EmitterFunc[string, string, *Split](func(line string, out source.Output[string], sp *Split) error {
			out.Collect(line)
			sp.Next++
			return nil
		}),
		InitState: func(sp Split) *Split { return &sp },
		ToSplit:   func(sp *Split) Split { return *sp },
	}, readerbase.PullSplits())
}

// enumerator hands out one endpoint per request.
type enumerator struct {
	ctx     source.EnumeratorContext[Split]
	bounded bool
	pending []Split
}

func (e *enumerator) Start(context.Context) error { return nil }
func (e *enumerator) AddReader(int) error         { return nil }
func (e *enumerator) Close() error                { return nil }

func (e *enumerator) HandleSplitRequest(subtask int, _ string) error {
	if len(e.pending) == 0 {
		if e.bounded {
			e.ctx.SignalNoMoreSplits(subtask)
		}
		return nil
	}
	sp := e.pending[0]
	e.pending = e.pending[1:]
	return e.ctx.AssignSplits(map[int][]Split{subtask: {sp}})
}

func (e *enumerator) AddSplitsBack(splits []Split, _ int) error {
	e.pending = append(e.pending, splits...)
	return nil
}

func (e *enumerator) SnapshotState(int64) ([]Split, error) { return slices.Clone(e.pending), nil }

// fetcher does the blocking reads, on readerbase's fetcher goroutine.
type fetcher struct {
	s      *Source
	client *http.Client
	splits []Split // positions as fetched, ahead of the emitted ones
}

func (f *fetcher) AddSplits(splits []Split) error {
	f.splits = append(f.splits, splits...)
	return nil
}

func (f *fetcher) Fetch(ctx context.Context) (readerbase.Batch[string], error) {
	var b readerbase.Batch[string]
	for i := 0; i < len(f.splits); i++ {
		sp := &f.splits[i]
		lines, err := f.get(ctx, sp)
		if err != nil {
			return b, err
		}
		if len(lines) > 0 {
			b.Records = append(b.Records, readerbase.SplitRecords[string]{SplitID: sp.URL, Records: lines})
			sp.Next += int64(len(lines))
		}
		if ctx.Err() != nil { // woken up or stopping: keep what we have
			return b, nil
		}
		if len(lines) == 0 && f.s.Bounded {
			b.Finished = append(b.Finished, sp.URL)
			f.splits = slices.Delete(f.splits, i, i+1)
			i--
		}
	}
	if len(b.Records) == 0 && len(b.Finished) == 0 {
		select { // nothing new anywhere: wait before polling again
		case <-ctx.Done():
		case <-time.After(orDefault(f.s.PollInterval, 100*time.Millisecond)):
		}
	}
	return b, nil
}

func (f *fetcher) get(ctx context.Context, sp *Split) ([]string, error) {
	u, err := url.Parse(sp.URL)
	if err != nil {
		return nil, fmt.Errorf("httpsource: split %q: %w", sp.URL, err)
	}
	q := u.Query()
	q.Set("from", strconv.FormatInt(sp.Next, 10))
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil // woken up or stopping: not an error
		}
		return nil, fmt.Errorf("httpsource: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("httpsource: GET %s: %s", u, resp.Status)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("httpsource: read %s at line %d: %w", u, sp.Next+int64(len(lines)), err)
	}
	return lines, nil
}

func (f *fetcher) Close() error {
	f.client.CloseIdleConnections()
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

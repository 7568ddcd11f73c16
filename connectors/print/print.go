package print

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/sluice-io/sluice/sink"
)

// Option configures a Sink.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	w      io.Writer
	prefix string
}

// Sink prints records, one line each, to an io.Writer shared by all its
// writers. Each line is written with one Write call under a mutex, so lines
// of parallel writers never interleave. A Sink is safe for concurrent use.
type Sink[T any] struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
}

var _ sink.Sink[int] = (*Sink[int])(nil)

// To sets the destination. The default is os.Stdout.
func To(w io.Writer) Option { return optionFunc(func(c *config) { c.w = w }) }

// Prefix sets the line prefix (Flink's sink identifier). The default is none.
func Prefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// New returns a print sink.
func New[T any](opts ...Option) *Sink[T] {
	cfg := &config{w: os.Stdout}
	for _, o := range opts {
		o.apply(cfg)
	}
	return &Sink[T]{mu: &sync.Mutex{}, w: cfg.w, prefix: cfg.prefix}
}

// CreateWriter returns the writer of one subtask.
func (s *Sink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	var p string
	switch {
	case s.prefix != "" && ic.Parallelism() > 1:
		p = s.prefix + ":" + strconv.Itoa(ic.SubtaskIndex()+1) + "> "
	case ic.Parallelism() > 1:
		p = strconv.Itoa(ic.SubtaskIndex()+1) + "> "
	case s.prefix != "":
		p = s.prefix + "> "
	}
	return &writer[T]{s: s, prefix: p}, nil
}

// writer is used from its subtask's goroutine only.
type writer[T any] struct {
	s      *Sink[T]
	prefix string
	buf    []byte
}

func (w *writer[T]) Write(ctx context.Context, v T, _ sink.Meta) error {
	w.buf = append(w.buf[:0], w.prefix...)
	w.buf = fmt.Appendf(w.buf, "%v\n", v)
	w.s.mu.Lock()
	_, err := w.s.w.Write(w.buf)
	w.s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("print: %w", err)
	}
	return nil
}

func (w *writer[T]) Flush(context.Context, bool) error { return nil }
func (w *writer[T]) Close() error                      { return nil }

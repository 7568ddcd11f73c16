package watermark

// Combiner merges the watermarks of several outputs (the splits of a
// reader, the inputs of an operator) into one: the minimum over the active
// outputs. An idle output is left out until it emits again; when all are
// idle the combination is idle. The combined watermark never goes back.
//
// A Combiner is not safe for concurrent use. The zero value is not usable;
// call NewCombiner.
type Combiner[K comparable] struct {
	parts   map[K]*part
	emitted int64
}

type part struct {
	wm   int64
	idle bool
}

// NewCombiner returns an empty combiner.
func NewCombiner[K comparable]() *Combiner[K] {
	return &Combiner[K]{parts: map[K]*part{}, emitted: Min}
}

// Add registers an output; it holds the combination back at Min until it
// emits a watermark or goes idle.
func (c *Combiner[K]) Add(k K) {
	if _, ok := c.parts[k]; !ok {
		c.parts[k] = &part{wm: Min}
	}
}

// Remove forgets an output (a finished split).
func (c *Combiner[K]) Remove(k K) { delete(c.parts, k) }

// Len is the number of outputs.
func (c *Combiner[K]) Len() int { return len(c.parts) }

// Update records a watermark of output k (registering it if needed) and
// marks it active.
func (c *Combiner[K]) Update(k K, wm int64) {
	p, ok := c.parts[k]
	if !ok {
		p = &part{wm: Min}
		c.parts[k] = p
	}
	if wm > p.wm {
		p.wm = wm
	}
	p.idle = false
}

// MarkIdle marks output k idle.
func (c *Combiner[K]) MarkIdle(k K) {
	if p, ok := c.parts[k]; ok {
		p.idle = true
	}
}

// MarkActive marks output k active without a new watermark (it produced a
// record).
func (c *Combiner[K]) MarkActive(k K) {
	if p, ok := c.parts[k]; ok {
		p.idle = false
	}
}

// Advance computes the combination. It returns the new watermark and true
// when it moved forward since the last call, and reports whether all outputs
// are idle (then the caller should mark its own output idle).
func (c *Combiner[K]) Advance() (wm int64, advanced bool, allIdle bool) {
	min, active := Max, 0
	for _, p := range c.parts {
		if p.idle {
			continue
		}
		active++
		if p.wm < min {
			min = p.wm
		}
	}
	if active == 0 {
		return c.emitted, false, len(c.parts) > 0
	}
	if min > c.emitted {
		c.emitted = min
		return min, true, false
	}
	return c.emitted, false, false
}

// Current is the last combined watermark.
func (c *Combiner[K]) Current() int64 { return c.emitted }

// Watermark returns the last watermark of output k (Min if it emitted
// none yet) and whether k is registered.
func (c *Combiner[K]) Watermark(k K) (int64, bool) {
	p, ok := c.parts[k]
	if !ok {
		return Min, false
	}
	return p.wm, true
}

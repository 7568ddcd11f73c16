package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The CDC source's reconciliation compares the keys of changes with the
// key ranges of the snapshot's pages (Segments). Keys of integers and
// uuids compare in Go (uuid's order is its bytes', which is its text
// form's); any other key (text with its collation, numeric, timestamps,
// composites of those) is compared by the server, one query per fetched
// batch of changes, so that the order is the one the pages were read in.

// goComparable reports whether the key compares in Go.
func (t *srcTable) goComparable() bool {
	for _, k := range t.keys {
		switch k.oid {
		case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.UUIDOID:
		default:
			return false
		}
	}
	return true
}

// compareGo compares two keys of a goComparable table, column by column.
func (t *srcTable) compareGo(a, b []string) (int, error) {
	for i, k := range t.keys {
		var c int
		if k.oid == pgtype.UUIDOID {
			c = strings.Compare(strings.ToLower(a[i]), strings.ToLower(b[i]))
		} else {
			x, err := strconv.ParseInt(a[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("key column %q value %q: %w", k.name, a[i], err)
			}
			y, err := strconv.ParseInt(b[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("key column %q value %q: %w", k.name, b[i], err)
			}
			c = compareInt(x, y)
		}
		if c != 0 {
			return c, nil
		}
	}
	return 0, nil
}

func compareInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// segBounds is a Segment's bounds, decoded (nil: unbounded).
type segBounds struct{ lo, hi []string }

func (t *srcTable) segBounds(segs []Segment) ([]segBounds, error) {
	out := make([]segBounds, len(segs))
	for i, s := range segs {
		var err error
		if s.Lo != nil {
			if out[i].lo, err = t.decodeKey(*s.Lo); err != nil {
				return nil, err
			}
		}
		if s.Hi != nil {
			if out[i].hi, err = t.decodeKey(*s.Hi); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// reconcile marks the changes of els the snapshot saw already (seen): a
// change whose key is in a page (lo < key <= hi) whose snapshot saw its
// transaction. Changes after every page's high watermark are newer than
// every page; once the stream passed it, the pages are dropped.
func (r *splitReader[T]) reconcile(sp *Split, els []elem) error {
	if len(sp.Segments) == 0 {
		return nil
	}
	h := maxH(sp.Segments)
	var idx []int
	for i := range els {
		if els[i].kind == eChange && els[i].lsn <= h {
			idx = append(idx, i)
		}
	}
	if len(idx) > 0 {
		keys := make([][]string, len(idx))
		for j, i := range idx {
			keys[j] = els[i].keyParts
		}
		segOf, err := r.findSegments(sp.Segments, keys)
		if err != nil {
			return fmt.Errorf("postgres CDC source: reconcile changes of table %s with the snapshot: %w", r.t.name, err)
		}
		for j, i := range idx {
			if s := segOf[j]; s >= 0 {
				els[i].seen = sp.Segments[s].visible(els[i].ch.Xid)
			}
		}
	}
	if sp.LSN > h {
		sp.Segments = nil
	}
	return nil
}

// findSegments returns, for each key, the index of the segment holding
// it, or -1.
func (r *splitReader[T]) findSegments(segs []Segment, keys [][]string) ([]int, error) {
	t := r.t
	bounds, err := t.segBounds(segs)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(keys))
	if t.goComparable() {
	next:
		for j, k := range keys {
			out[j] = -1
			for i, b := range bounds {
				if b.lo != nil {
					c, err := t.compareGo(k, b.lo)
					if err != nil {
						return nil, err
					}
					if c <= 0 {
						continue
					}
				}
				if b.hi != nil {
					c, err := t.compareGo(k, b.hi)
					if err != nil {
						return nil, err
					}
					if c > 0 {
						continue
					}
				}
				out[j] = i
				continue next
			}
		}
		return out, nil
	}
	// The server compares: keys and bounds as text arrays per column.
	n := len(t.keys)
	args := make([]any, 0, 3*n+1)
	for c := range n {
		col := make([]string, len(keys))
		for j, k := range keys {
			col[j] = k[c]
		}
		args = append(args, col)
	}
	ids := make([]int32, len(segs))
	for i := range ids {
		ids[i] = int32(i)
	}
	args = append(args, ids)
	for _, hi := range []bool{false, true} {
		for c := range n {
			col := make([]*string, len(segs))
			for i, b := range bounds {
				v := b.lo
				if hi {
					v = b.hi
				}
				if v != nil {
					col[i] = &v[c]
				}
			}
			args = append(args, col)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := r.conn.Query(ctx, t.segmentSQL(), args...)
	if err != nil {
		return nil, err
	}
	for j := range out {
		out[j] = -1
	}
	type hit struct{ J, I int32 }
	hits, err := pgx.CollectRows(rows, pgx.RowToStructByPos[hit])
	if err != nil {
		return nil, err
	}
	for _, h := range hits {
		if h.J >= 1 && int(h.J) <= len(out) {
			out[h.J-1] = int(h.I)
		}
	}
	return out, nil
}

// segmentSQL finds the segment of each key: $1 … $n the keys' columns,
// $n+1 the segments' indexes, then their lo columns and hi columns (NULL:
// unbounded), as text arrays; each column compared as its type with its
// collation.
func (t *srcTable) segmentSQL() string {
	n := len(t.keys)
	cast := func(expr string, k keyCol) string {
		e := expr + "::text::" + k.typ
		if k.collation != "" {
			e = "(" + e + ") COLLATE " + pgx.Identifier{k.collation}.Sanitize()
		}
		return e
	}
	key, lo, hi := make([]string, n), make([]string, n), make([]string, n)
	var kArgs, kCols, sArgs, sCols []string
	for c, k := range t.keys {
		key[c] = cast(fmt.Sprintf("c.k%d", c), k)
		lo[c] = cast(fmt.Sprintf("s.l%d", c), k)
		hi[c] = cast(fmt.Sprintf("s.h%d", c), k)
		kArgs = append(kArgs, fmt.Sprintf("$%d::text[]", c+1))
		kCols = append(kCols, fmt.Sprintf("k%d", c))
	}
	sArgs = append(sArgs, fmt.Sprintf("$%d::int4[]", n+1))
	sCols = append(sCols, "i")
	for c := range n {
		sArgs = append(sArgs, fmt.Sprintf("$%d::text[]", n+2+c))
		sCols = append(sCols, fmt.Sprintf("l%d", c))
	}
	for c := range n {
		sArgs = append(sArgs, fmt.Sprintf("$%d::text[]", 2*n+2+c))
		sCols = append(sCols, fmt.Sprintf("h%d", c))
	}
	return fmt.Sprintf(`SELECT c.j::int4, min(s.i)::int4
		FROM unnest(%s) WITH ORDINALITY AS c(%s, j)
		JOIN unnest(%s) AS s(%s)
		ON (s.l0 IS NULL OR %s > %s) AND (s.h0 IS NULL OR %s <= %s)
		GROUP BY c.j`,
		strings.Join(kArgs, ", "), strings.Join(kCols, ", "),
		strings.Join(sArgs, ", "), strings.Join(sCols, ", "),
		rowOf(key), rowOf(lo), rowOf(key), rowOf(hi))
}

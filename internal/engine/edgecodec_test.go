package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
)

// TestEdgeCodecWrongType: an edge whose codec encodes another record type
// fails to open or listen with an error naming the edge, instead of
// running without a codec.
func TestEdgeCodecWrongType(t *testing.T) {
	l := &edgeLinks{name: "map->sink", codec: exchange.BytesCodec{}, peers: []string{"127.0.0.1:1"}}
	o := &netOutput[int]{links: l, senders: make([]*exchange.Sender[elem[int]], 1)}
	err := o.open(t.Context())
	if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), "map->sink") {
		t.Errorf("open: %v, want ErrInvalidJob naming edge map->sink", err)
	}
	g := &gate[int]{}
	err = g.listen(l, 0, exchange.Epoch{})
	if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), "map->sink") {
		t.Errorf("listen: %v, want ErrInvalidJob naming edge map->sink", err)
	}
	if c, err := edgeCodec[[]byte](l); c == nil || err != nil {
		t.Errorf("edgeCodec of the right type: %v, %v", c, err)
	}
	if c, err := edgeCodec[int](&edgeLinks{name: "a->b"}); c != nil || err != nil {
		t.Errorf("edgeCodec without a codec: %v, %v", c, err)
	}
}

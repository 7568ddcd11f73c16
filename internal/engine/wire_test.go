package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/restart"
)

var errCustom = errors.New("custom sentinel")

// sampleFrames has a frame of every kind with every field set that the
// kind carries.
func sampleFrames() []*frame {
	k := wireKey{session: 3, vertex: "src -> map", subtask: 2, gen: 5}
	st := checkpoint.TaskState{Vertex: "sink", Subtask: 2, Parallelism: 4,
		Parts: map[string][][]byte{"writer": {[]byte("w")}, "committables": {{}, []byte("c1")}, "splits": {}}}
	taskErr := &TaskError{Operator: "src -> sink", Subtask: 2, Err: fmt.Errorf("write: %w", restart.ErrUnrecoverable)}
	return []*frame{
		{kind: fHello, version: wireVersion, job: "j", jobID: "abc", runID: "r1", plan: []string{"src [src] p=4", "sink [sink] p=2"}},
		{kind: fDeploy, req: 9, session: 3, deploy: []deployItem{{key: k, attemptNo: 7, restoredID: 12, states: []checkpoint.TaskState{st}}, {key: k}}},
		{kind: fDeploy, req: 10, session: 4, deploy: []deployItem{{key: k}}, routes: &wireRoutes{self: 1, addrs: []string{"10.0.0.1:7071", "10.0.0.2:7071"}, hostOf: [][]int{{0, 1, 0}, {1, 0, 1}}}},
		{kind: fStart, session: 3, keys: []wireKey{k, {session: 3, vertex: "x"}}},
		{kind: fMail, key: k, mail: mailAddSplits, splits: [][]byte{[]byte("s1"), []byte("s2")}},
		{kind: fMail, key: k, mail: mailTrigger, id: 4, stop: true},
		{kind: fMail, key: k, mail: mailEvent, event: []byte("e")},
		{kind: fCancel, key: k},
		{kind: fEnd, session: 3},
		{kind: fHelloAck},
		{kind: fDeployed, req: 9, upTos: []int64{11, 12}},
		{kind: fDeployed, req: 9, err: taskErr},
		{kind: fSplitRequest, key: k},
		{kind: fReaderEvent, key: k, event: []byte{0, 1}},
		{kind: fAck, key: k, id: 4, states: []checkpoint.TaskState{st, {Vertex: "src", Parts: map[string][][]byte{}}}},
		{kind: fFinished, key: k},
		{kind: fExited, key: k},
		{kind: fExited, key: k, err: taskErr},
		{kind: fCommitted, key: k, upTo: 4, committed: []pendingCommittable{{checkpoint: 3, data: []byte("a")}, {checkpoint: 4, data: []byte{}}}},
	}
}

// TestWireRoundTrip: every frame decodes to what was encoded; errors come
// back as a TaskError around a RemoteError with the same text, matching
// the sentinels they matched.
func TestWireRoundTrip(t *testing.T) {
	sentinels := (&Config{RemoteErrors: []error{errCustom}}).sentinels()
	for _, f := range sampleFrames() {
		t.Run(fmt.Sprint(f.kind), func(t *testing.T) {
			got, err := decodeFrame(encodeFrame(f, sentinels), "h1", sentinels)
			if err != nil {
				t.Fatal(err)
			}
			if f.err != nil {
				if got.err == nil || got.err.Error() != f.err.Error() {
					t.Fatalf("error %v, want %v", got.err, f.err)
				}
				var te *TaskError
				var re *RemoteError
				if !errors.As(got.err, &te) || te.Subtask != 2 || !errors.As(got.err, &re) || re.Host != "h1" {
					t.Errorf("error %#v: want a TaskError of subtask 2 around a RemoteError of host h1", got.err)
				}
				if !errors.Is(got.err, restart.ErrUnrecoverable) {
					t.Error("the error lost its classification (restart.ErrUnrecoverable)")
				}
				got.err, f.err = nil, nil
			}
			normalize(got)
			normalize(f)
			if !reflect.DeepEqual(got, f) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, f)
			}
		})
	}
}

// normalize makes empty and nil slices compare equal where the wire does
// not tell them apart (states keep the difference).
func normalize(f *frame) {
	if len(f.plan) == 0 {
		f.plan = nil
	}
	if len(f.splits) == 0 {
		f.splits = nil
	}
	if len(f.event) == 0 {
		f.event = nil
	}
	for i := range f.committed {
		if len(f.committed[i].data) == 0 {
			f.committed[i].data = nil
		}
	}
}

// TestWireErrors: sentinels of the engine and of Config.RemoteErrors keep
// their identity, others become text; an error that was no TaskError is a
// bare RemoteError.
func TestWireErrors(t *testing.T) {
	sentinels := (&Config{RemoteErrors: []error{errCustom}}).sentinels()
	cases := []struct {
		err  error
		is   []error
		isnt []error
	}{
		{err: fmt.Errorf("x: %w", errCustom), is: []error{errCustom}, isnt: []error{ErrPanic}},
		{err: &TaskError{Operator: "a", Subtask: -1, Err: fmt.Errorf("%w: boom", ErrPanic)}, is: []error{ErrPanic}},
		{err: fmt.Errorf("y: %w", context.Canceled), is: []error{context.Canceled}, isnt: []error{ErrHostLost}},
		{err: errors.Join(ErrHostLost, errors.New("z")), is: []error{ErrHostLost}},
		{err: errors.New("plain"), isnt: []error{errCustom, restart.ErrUnrecoverable}},
	}
	for _, c := range cases {
		f := &frame{kind: fExited, err: c.err}
		got, err := decodeFrame(encodeFrame(f, sentinels), "h", sentinels)
		if err != nil {
			t.Fatal(err)
		}
		if got.err.Error() != c.err.Error() {
			t.Errorf("text %q, want %q", got.err, c.err)
		}
		for _, s := range c.is {
			if !errors.Is(got.err, s) {
				t.Errorf("%v: lost %v", c.err, s)
			}
		}
		for _, s := range c.isnt {
			if errors.Is(got.err, s) {
				t.Errorf("%v: matches %v", c.err, s)
			}
		}
	}
}

// TestWireDamaged: every truncation of every frame, and a frame with
// trailing bytes, fails to decode with an error (never a panic).
func TestWireDamaged(t *testing.T) {
	s := builtinSentinels()
	for _, f := range sampleFrames() {
		b := encodeFrame(f, s)
		for n := range len(b) {
			if _, err := decodeFrame(b[:n], "h", s); err == nil {
				t.Errorf("kind %d cut to %d of %d bytes: decoded", f.kind, n, len(b))
			}
		}
		if _, err := decodeFrame(append(b, 0), "h", s); err == nil {
			t.Errorf("kind %d with a trailing byte: decoded", f.kind)
		}
	}
	if _, err := decodeFrame([]byte{200}, "h", s); err == nil {
		t.Error("unknown kind: decoded")
	}
	if _, err := decodeFrame(encodeFrame(&frame{kind: fMail, mail: mailCommitResult}, s), "h", s); err == nil {
		t.Error("a commit-result mail: decoded")
	}
}

// FuzzWireDecode feeds arbitrary bytes to the decoder: errors, no panics,
// and what decodes encodes again to a frame that decodes the same.
func FuzzWireDecode(f *testing.F) {
	s := builtinSentinels()
	for _, fr := range sampleFrames() {
		f.Add(encodeFrame(fr, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b, "h", s)
		if err != nil {
			return
		}
		again, err := decodeFrame(encodeFrame(fr, s), "h", s)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if (fr.err == nil) != (again.err == nil) || (fr.err != nil && fr.err.Error() != again.err.Error()) {
			t.Fatalf("error changed: %v, then %v", fr.err, again.err)
		}
	})
}

type testHost string

func (h testHost) ID() string                             { return string(h) }
func (testHost) session(*attempt) (*remoteSession, error) { return nil, nil }
func (testHost) live() bool                               { return true }
func (testHost) exchangeAddr(*Job) string                 { return "" }

// TestPlacementRule: regions spread round-robin over the hosts (all on
// the first when the job cannot spread); a restarting region keeps its
// live host, else goes to the least loaded live host, the first on ties.
func TestPlacementRule(t *testing.T) {
	a, b, c := testHost("a"), testHost("b"), testHost("c")
	got := spread(5, []TaskHost{a, b, c}, false)
	if want := []TaskHost{a, b, c, a, b}; !reflect.DeepEqual(got, want) {
		t.Errorf("spread: %v, want %v", got, want)
	}
	if got := spread(3, []TaskHost{a, b}, true); !reflect.DeepEqual(got, []TaskHost{a, a, a}) {
		t.Errorf("spread of a single-host job: %v", got)
	}
	hostOf := []TaskHost{a, b, c, a, b, c}
	cases := []struct {
		r     int
		hosts []TaskHost
		want  TaskHost
	}{
		{r: 1, hosts: []TaskHost{a, b, c}, want: b},                         // its host is live
		{r: 2, hosts: []TaskHost{a, b}, want: a},                            // c lost: a and b have 2 each, a first
		{r: 1, hosts: []TaskHost{a, c}, want: a},                            // b lost: a 2, c 2
		{r: 0, hosts: []TaskHost{b, c}, want: b},                            // a lost
		{r: 4, hosts: []TaskHost{c, a}, want: c},                            // order is the hosts' order
		{r: 5, hosts: []TaskHost{a, b, testHost("d")}, want: testHost("d")}, // a new host has none
	}
	for _, cs := range cases {
		if got := pickRestart(cs.r, hostOf, cs.hosts, false); got != cs.want {
			t.Errorf("region %d on %v: %v, want %v", cs.r, cs.hosts, got, cs.want)
		}
	}
}

package registry

import (
	"slices"
	"testing"
	"time"
)

func TestChecks(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(any) error
		v     any
		ok    bool
	}{
		{"AtLeast ok", AtLeast(0), int64(0), true},
		{"AtLeast low", AtLeast(1), int64(0), false},
		{"AtLeast float", AtLeast(0), -0.5, false},
		{"AtLeast duration", AtLeast(0), -time.Second, false},
		{"Between ok", Between(1, 1024), int64(1024), true},
		{"Between high", Between(1, 1024), int64(1025), false},
		{"Positive zero duration", Positive, time.Duration(0), false},
		{"Positive duration", Positive, time.Millisecond, true},
		{"Positive int", Positive, int64(0), false},
		{"file mode", checkFileMode, "0640", true},
		{"file mode 0o", checkFileMode, "0o600", true},
		{"file mode no owner write", checkFileMode, "0444", false},
		{"file mode not octal", checkFileMode, "0698", false},
		{"file mode too big", checkFileMode, "01777", false},
	} {
		if err := c.check(c.v); (err == nil) != c.ok {
			t.Errorf("%s: %v: got %v", c.name, c.v, err)
		}
	}
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		"h1:9092,h2:9092":     {"h1:9092", "h2:9092"},
		" h1:9092 , h2:9092 ": {"h1:9092", "h2:9092"},
		"one":                 {"one"},
		"":                    {},
	} {
		got, err := SplitList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitList(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := SplitList("a,,b"); err == nil {
		t.Error("a,,b: no error")
	}
}

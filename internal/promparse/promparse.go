// Package promparse parses the Prometheus text exposition format for
// tests with the reference parser (github.com/prometheus/common/expfmt).
package promparse

// Family is one metric family.
type Family struct {
	Name    string
	Type    string // "counter", "gauge", …
	Help    string
	Samples []Sample
}

// Sample is one sample of a family.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Get returns the value of the sample whose labels include match, and
// whether there is one.
func (f Family) Get(match map[string]string) (float64, bool) {
	for _, s := range f.Samples {
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return s.Value, true
		}
	}
	return 0, false
}

// Sum adds up every sample of the family.
func (f Family) Sum() float64 {
	var t float64
	for _, s := range f.Samples {
		t += s.Value
	}
	return t
}

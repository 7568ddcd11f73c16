package promparse

import (
	"io"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Reference is true: this build uses github.com/prometheus/common/expfmt.
const Reference = true

// Parse parses a text exposition with expfmt.TextParser.
func Parse(r io.Reader) (map[string]*Family, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := map[string]*Family{}
	for name, mf := range mfs {
		f := &Family{Name: name, Type: strings.ToLower(mf.GetType().String()), Help: mf.GetHelp()}
		for _, m := range mf.GetMetric() {
			s := Sample{Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.Value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.Value = m.GetGauge().GetValue()
			default:
				s.Value = m.GetUntyped().GetValue()
			}
			f.Samples = append(f.Samples, s)
		}
		out[name] = f
	}
	return out, nil
}

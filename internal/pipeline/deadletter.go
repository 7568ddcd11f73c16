package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/internal/transform"
)

// policy reads an on-error value.
func (p *parser) policy(n *yaml.Node, field string) (registry.Policy, bool) {
	v, ok := p.value(n, field, registry.Option{Type: registry.Enum, Values: registry.Policies})
	if !ok {
		return "", false
	}
	return registry.Policy(v.(string)), true
}

// errorPolicies reads the top-level on-error and dead-letter sections,
// fills in the transforms' default policy and checks that dead letters
// have a sink and a dead-letter sink has dead letters.
func (p *parser) errorPolicies(s *Spec, root *yaml.Node, vals map[string]*yaml.Node) {
	s.OnError = registry.PolicyFail
	var onErrorNode *yaml.Node
	if n, ok := vals["on-error"]; ok {
		onErrorNode = n
		if pol, ok := p.policy(n, "on-error"); ok {
			s.OnError = pol
		}
	}
	for _, c := range s.Steps() {
		if c.OnError == "" {
			c.OnError = s.OnError
		}
	}
	if src, ok := p.reg.Source(s.Source.Type); ok && src.DeadLetters != nil && s.Source.Type != "" {
		s.SourceDeadLetters = src.DeadLetters(s.Source.Options)
	}

	// Who sends dead letters, and from which line.
	type sender struct {
		line int
		what string
	}
	var senders []sender
	if s.SourceDeadLetters {
		senders = append(senders, sender{s.Source.Line, "source " + s.Source.Name})
	}
	for _, c := range s.Transforms {
		if c.OnError != registry.PolicyDeadLetter {
			continue
		}
		line := p.policyLines[c.Name]
		if line == 0 && onErrorNode != nil {
			line = onErrorNode.Line
		}
		senders = append(senders, sender{line, "transform " + c.Name})
	}
	if c := s.SinkStep; c != nil && c.OnError == registry.PolicyDeadLetter {
		line := s.Sink.Line
		if onErrorNode != nil {
			line = onErrorNode.Line
		}
		senders = append(senders, sender{line, "sink " + s.Sink.Name + " (its expressions)"})
	}

	dn, hasDL := vals["dead-letter"]
	if hasDL {
		c := p.connector(dn, "dead-letter", registry.KindSink)
		if c.Type != "" && c.Name == c.Type {
			c.Name = "dead-letter"
		}
		s.DeadLetter = &c
		if c.Type != "" && len(senders) == 0 {
			p.errorf(dn, "dead-letter", "no record is sent here: set on-error: dead-letter (for all transforms or on one), or the source's on-malformed: dead-letter")
		}
		taken := []string{s.Source.Name, s.Sink.Name}
		for _, t := range s.Transforms {
			taken = append(taken, t.Name)
		}
		if slices.Contains(taken, c.Name) {
			p.errorf(dn, "dead-letter.name", "operator name %q is used twice (name the dead-letter sink with name:)", c.Name)
		}
		if c.UID != "" && (c.UID == s.Source.UID || c.UID == s.Sink.UID) {
			p.errorf(dn, "dead-letter.uid", "uid %q is used twice; uids must be unique (they key checkpoint state)", c.UID)
		}
		if reg, ok := p.reg.Lookup(registry.KindSink, c.Type); ok && s.Delivery == registry.ExactlyOnce && !reg.ExactlyOnce {
			p.errorf(dn, "dead-letter.type", "sink %q cannot deliver exactly once, but the pipeline does (use an exactly-once sink such as file or kafka, or delivery: at-least-once)", c.Type)
		}
		if sk, ok := p.reg.Sink(c.Type); ok && sk.CheckSource != nil && s.Source.Type != "" && len(p.errs) == 0 {
			warning, err := sk.CheckSource(s.Source.Type, s.Source.Options, c.Options)
			if err != nil {
				p.errorf(dn, "dead-letter", "%v", err)
			}
			if warning != "" {
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: dead-letter: %s", p.file, dn.Line, warning))
			}
		}
	} else {
		for _, sd := range senders {
			p.errorf(&yaml.Node{Line: sd.line}, "dead-letter", "%s sends dead letters, but the pipeline has no dead-letter sink (add a dead-letter: section like sink:)", sd.what)
		}
	}

	if transform.NeedsPolicies(s.Steps(), s.SourceDeadLetters) {
		reserved := []string{transform.RouteIn, transform.RouteMain, transform.RouteDead}
		names := []string{s.Source.Name, s.Sink.Name}
		for _, t := range s.Steps() {
			names = append(names, t.Name)
		}
		if s.DeadLetter != nil {
			names = append(names, s.DeadLetter.Name)
		}
		for _, n := range names {
			if slices.Contains(reserved, n) {
				p.errorf(root, "", "operator name %q is reserved for routing records with errors (reserved: %s)", n, strings.Join(reserved, ", "))
			}
		}
	}
}

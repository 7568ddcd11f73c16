package pipeline

import (
	"fmt"
	"strings"
)

// Lookup finds an environment variable (os.LookupEnv in the CLI).
type Lookup func(name string) (string, bool)

// interpolate replaces ${VAR} and ${VAR:-default} in s. "$${" stands for a
// literal "${". It reports whether anything was substituted, so that callers
// never echo a value that may hold a secret. Errors name the variable, never
// a value.
func interpolate(s string, lookup Lookup) (out string, substituted bool, err error) {
	out, subs, err := interpolateVars(s, lookup)
	return out, subs != nil, err
}

// Substitution is one ${VAR} replaced by a value from the environment.
type Substitution struct {
	Var   string // the variable's name; "" for a secret option's value written in the file
	Value string // its value (the default of ${VAR:-default} is not a secret)
	// Secret: the value is an option marked Secret (a token, a
	// password); it is hidden even when short.
	Secret bool
}

// interpolateVars is interpolate that also returns what came from the
// environment.
func interpolateVars(s string, lookup Lookup) (out string, subs []Substitution, err error) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	substituted := false
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", nil, fmt.Errorf("unterminated ${ (want ${NAME})")
		}
		expr := s[i+2 : i+end]
		i += end + 1
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validVarName(name) {
			return "", nil, fmt.Errorf("invalid environment variable name %q in ${...}", name)
		}
		v, ok := lookup(name)
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
			subs = append(subs, Substitution{Var: name, Value: v})
		case hasDef:
			b.WriteString(def)
		default:
			return "", nil, fmt.Errorf("environment variable %s is not set", name)
		}
		substituted = true
	}
	if substituted && len(subs) == 0 {
		// Only defaults: still "from the environment" for the callers that
		// hide such values, with nothing secret to record.
		subs = []Substitution{}
	}
	return b.String(), subs, nil
}

func validVarName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

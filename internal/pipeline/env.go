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
	if !strings.Contains(s, "${") {
		return s, false, nil
	}
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
			return "", false, fmt.Errorf("unterminated ${ (want ${NAME})")
		}
		expr := s[i+2 : i+end]
		i += end + 1
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validVarName(name) {
			return "", false, fmt.Errorf("invalid environment variable name %q in ${...}", name)
		}
		v, ok := lookup(name)
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", false, fmt.Errorf("environment variable %s is not set", name)
		}
		substituted = true
	}
	return b.String(), substituted, nil
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

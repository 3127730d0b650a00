package tlsconf

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper turns a client certificate's distinguished name into a
// user name with Kafka's ssl.principal.mapping.rules: a list of
// RULE:pattern/replacement/[LU] (the first rule whose pattern matches the
// whole name applies; L or U lowers or uppers the result) and DEFAULT (the
// name unchanged). With no rule matching, the name is used unchanged.
type PrincipalMapper struct{ rules []mappingRule }

type mappingRule struct {
	def  bool
	re   *regexp.Regexp
	repl string
	fold byte // 0, 'L' or 'U'
}

// maxRules bounds the rules of one mapping.
const maxRules = 256

// ParseMappingRules reads ssl.principal.mapping.rules ("" is DEFAULT).
func ParseMappingRules(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	for s = strings.TrimLeft(s, " \t\n,"); s != ""; s = strings.TrimLeft(s, " \t\n,") {
		if len(m.rules) == maxRules {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: more than %d rules", maxRules)
		}
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			m.rules = append(m.rules, mappingRule{def: true})
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			r, rest, err := parseRule(s[len("RULE:"):])
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: %w", err)
			}
			m.rules = append(m.rules, r)
			s = rest
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: expected RULE: or DEFAULT at %q", s)
		}
	}
	return m, nil
}

// parseRule reads pattern/replacement/[LU] (a backslash escapes a slash).
func parseRule(s string) (mappingRule, string, error) {
	pat, s, ok := upToSlash(s)
	if !ok {
		return mappingRule{}, "", errors.New("rule without a closing / after its pattern")
	}
	repl, s, ok := upToSlash(s)
	if !ok {
		return mappingRule{}, "", errors.New("rule without a closing / after its replacement")
	}
	r := mappingRule{repl: strings.ReplaceAll(repl, `\/`, "/")}
	if s != "" && (s[0] == 'L' || s[0] == 'U') {
		r.fold, s = s[0], s[1:]
	}
	re, err := regexp.Compile("^(?:" + pat + ")$")
	if err != nil {
		return mappingRule{}, "", err
	}
	r.re = re
	return r, s, nil
}

func upToSlash(s string) (field, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// Name maps a distinguished name (RFC 2253 form, as Kafka's X500 name).
func (m *PrincipalMapper) Name(dn string) string {
	for _, r := range m.rules {
		if r.def {
			return dn
		}
		if !r.re.MatchString(dn) {
			continue
		}
		out := r.re.ReplaceAllString(dn, r.repl)
		switch r.fold {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		return out
	}
	return dn
}

// Principal is the "User:<name>" principal of a client certificate.
func (m *PrincipalMapper) Principal(c *x509.Certificate) string {
	return "User:" + m.Name(c.Subject.String())
}

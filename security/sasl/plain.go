package sasl

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PlainUsers is the PLAIN mechanism over a fixed set of users.
type PlainUsers struct {
	users map[string]string // name → password
}

// NewPlain serves PLAIN for users (name → password).
func NewPlain(users map[string]string) *PlainUsers { return &PlainUsers{users: users} }

func (p *PlainUsers) Name() string    { return Plain }
func (p *PlainUsers) Start() Exchange { return &plainExchange{p: p} }

type plainExchange struct {
	p    *PlainUsers
	user string
	done bool
}

// Step reads authzid NUL authcid NUL passwd (RFC 4616). As in Kafka, an
// authorization id must be empty or the user's own.
func (x *plainExchange) Step(msg []byte) ([]byte, bool, error) {
	if x.done {
		return nil, false, errDone
	}
	x.done = true
	if len(msg) > MaxMessage {
		return nil, false, authFailed("Authentication failed: PLAIN message too long")
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, authFailed("Authentication failed: invalid PLAIN message")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" || len(pass) == 0 {
		return nil, false, authFailed("Authentication failed: empty user name or password")
	}
	if authz != "" && authz != user {
		return nil, false, authFailed("Authentication failed: Client requested an authorization id that is different from username")
	}
	want, ok := x.p.users[user]
	// Compare even for an unknown user, so timing does not tell.
	match := subtle.ConstantTimeCompare([]byte(want), pass) == 1
	if !ok || !match {
		return nil, false, authFailed("Authentication failed: Invalid username or password")
	}
	x.user = user
	return nil, true, nil
}

func (x *plainExchange) User() string      { return x.user }
func (x *plainExchange) Expiry() time.Time { return time.Time{} }

// JAAS is one login module entry of a sasl.jaas.config value:
// `org.apache.kafka.common.security.plain.PlainLoginModule required
// username="admin" password="admin-secret" user_alice="alice-secret";`.
type JAAS struct {
	Module  string
	Flag    string
	Options map[string]string
}

// maxJAASOptions bounds the options of one entry.
const maxJAASOptions = 10000

// ParseJAAS reads a sasl.jaas.config value (one entry; the trailing
// semicolon is required, as in Kafka).
func ParseJAAS(s string) (JAAS, error) {
	var j JAAS
	s = strings.TrimSpace(s)
	if !strings.HasSuffix(s, ";") {
		return j, errors.New("sasl.jaas.config: must end with ;")
	}
	s = strings.TrimSpace(s[:len(s)-1])
	var ok bool
	if j.Module, s, ok = cutSpace(s); !ok {
		return j, errors.New("sasl.jaas.config: want a login module and a control flag")
	}
	j.Flag, s, _ = cutSpace(s)
	switch j.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return j, fmt.Errorf("sasl.jaas.config: bad control flag %q", j.Flag)
	}
	j.Options = map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if len(j.Options) == maxJAASOptions {
			return j, errors.New("sasl.jaas.config: too many options")
		}
		key, rest, found := strings.Cut(s, "=")
		if !found || strings.TrimSpace(key) == "" {
			return j, fmt.Errorf("sasl.jaas.config: want key=value at %q", s)
		}
		val, rest, err := jaasValue(strings.TrimSpace(rest))
		if err != nil {
			return j, err
		}
		j.Options[strings.TrimSpace(key)] = val
		s = rest
	}
	return j, nil
}

func cutSpace(s string) (head, rest string, ok bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, " \t\n")
	if i < 0 {
		return s, "", s != ""
	}
	return s[:i], s[i+1:], true
}

// jaasValue reads a quoted (backslash escapes) or bare value.
func jaasValue(s string) (val, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		v, r, _ := cutSpace(s)
		return v, r, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", errors.New("sasl.jaas.config: unterminated quoted value")
}

// PlainUsersFromJAAS takes PLAIN's users from a PlainLoginModule entry's
// user_<name>="<password>" options.
func PlainUsersFromJAAS(j JAAS) map[string]string {
	users := map[string]string{}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users
}

package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// Role is what an API token may do.
type Role string

const (
	// RoleAdmin may use every route but the participate routes: submit,
	// cancel, enroll devices, create budgets, and read everything.
	RoleAdmin Role = "admin"
	// RoleAuditor may only read: the GET routes of jobs, metrics, rounds,
	// privacy ledgers, models, budgets and enrolled devices. It can check
	// what a deployment spends without being able to change it.
	RoleAuditor Role = "auditor"
)

// Roles lists the roles an API token can have, most powerful first.
var Roles = []Role{RoleAdmin, RoleAuditor}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// HashToken is the SHA-256 hash under which a token is stored and
// compared. Tokens are random (at least 128 bits when dpfl makes them),
// so an unsalted fast hash is enough: there is nothing to guess.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// Tokens maps the hashes of the accepted API tokens to their roles. Build
// it before serving; it is read-only afterwards and safe for concurrent
// use.
type Tokens struct {
	hashes [][sha256.Size]byte
	roles  []Role
}

// Add accepts the token whose SHA-256 hash is hash, with role r.
func (t *Tokens) Add(hash [sha256.Size]byte, r Role) {
	t.hashes = append(t.hashes, hash)
	t.roles = append(t.roles, r)
}

// Len is the number of accepted tokens.
func (t *Tokens) Len() int { return len(t.hashes) }

// Role returns the role of token, or false if no accepted token matches.
// It compares the token's hash with every accepted hash in constant time
// and without stopping at a match, so the time taken tells nothing about
// which hash, or how much of it, matched.
func (t *Tokens) Role(token string) (Role, bool) {
	if token == "" {
		return "", false
	}
	h := HashToken(token)
	var found Role
	for i, want := range t.hashes {
		if subtle.ConstantTimeCompare(h[:], want[:]) == 1 {
			found = t.roles[i]
		}
	}
	return found, found != ""
}

// roleKey is the echo context key under which tokenAuth leaves the
// caller's Role.
const roleKey = "dpfl.role"

// tokenAuth admits a request with a bearer API token that tokens accepts
// and records its role; anything else is 401.
func tokenAuth(tokens *Tokens) echo.MiddlewareFunc {
	return middleware.KeyAuthWithConfig(middleware.KeyAuthConfig{
		KeyLookup:  "header:" + echo.HeaderAuthorization,
		AuthScheme: "Bearer",
		Validator: func(key string, c echo.Context) (bool, error) {
			r, ok := tokens.Role(key)
			if ok {
				c.Set(roleKey, r)
			}
			return ok, nil
		},
		ErrorHandler: func(error, echo.Context) error {
			return echo.NewHTTPError(http.StatusUnauthorized, "missing or invalid bearer token (the client reads $DPFL_TOKEN or --token-file)")
		},
	})
}

// adminOnly refuses (403) a request whose token is not the admin's: the
// routes that change state.
func adminOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r, _ := c.Get(roleKey).(Role); r != RoleAdmin {
			return echo.NewHTTPError(http.StatusForbidden, "this token's role ("+string(r)+") may only read; "+c.Request().Method+" "+c.Path()+" needs the admin token")
		}
		return next(c)
	}
}

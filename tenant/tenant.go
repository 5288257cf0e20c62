package tenant

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/internal/testsignal"
)

var (
	// ErrUnauthorized is returned for a token that is unknown or revoked.
	ErrUnauthorized = errors.New("unknown or revoked API token")
	// ErrNotFound is returned for a tenant or token that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when a tenant name is taken.
	ErrExists = errors.New("tenant already exists")
)

// TokenPrefix starts every oncebox API token, so a leaked one is easy to recognise.
const TokenPrefix = "obx_"

// Role is what a token may do. Every token has exactly one.
type Role string

// The roles of API tokens.
const (
	// RoleAgent enqueues ops, reads its tenant's ops and uses MCP. It cannot decide an
	// approval or a review: the party an approval gates never holds the key to it.
	RoleAgent Role = "agent"
	// RoleApprover reads, lists and decides its tenant's approvals and reviews. It cannot
	// enqueue.
	RoleApprover Role = "approver"
	// RoleAdmin can do everything an approver can for its tenant. It cannot enqueue,
	// and it does not open the installation-wide endpoints: those span every tenant.
	RoleAdmin Role = "admin"
	// RoleOperator is the installation's operators': it opens the installation-wide
	// endpoints (River UI, /metrics when guarded, /healthz's last errors), which show
	// every tenant's jobs. It neither enqueues nor decides. Give it only to the people
	// who run oncebox, never to a tenant.
	RoleOperator Role = "operator"
	// RoleAuditor reads its tenant's audit log (the API's /v1/audit, the console's Audit
	// page) and its ops, for a person who answers for them months later. It neither
	// enqueues, nor decides, nor changes a setting.
	RoleAuditor Role = "auditor"
)

// Roles lists every role, in order of authority.
var Roles = []Role{RoleAgent, RoleAuditor, RoleApprover, RoleAdmin, RoleOperator}

// ParseRole returns the role named s, or an error naming the valid ones.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("tenant: unknown role %q: want agent, auditor, approver, admin or operator", s)
}

// CanEnqueue reports whether a token of this role may record new ops.
func (r Role) CanEnqueue() bool { return r == RoleAgent }

// CanOperate reports whether a token of this role opens the installation-wide operator
// endpoints (River UI, /metrics).
func (r Role) CanOperate() bool { return r == RoleOperator }

// CanAudit reports whether a token of this role may read its tenant's audit log: an
// auditor's or an admin's, never an agent's (the party the log answers for does not
// read it).
func (r Role) CanAudit() bool { return r == RoleAuditor || r == RoleAdmin }

// CanDecide reports whether a token of this role may approve, reject or resolve ops.
func (r Role) CanDecide() bool { return r == RoleApprover || r == RoleAdmin }

// Tenant is one customer of oncebox; every op belongs to one.
type Tenant struct {
	ID        int64
	Name      string
	CreatedAt time.Time
}

// Token describes a stored token (never the secret itself).
type Token struct {
	ID       int64
	TenantID int64
	Prefix   string
	Role     Role
	// Person is who the token belongs to ("" when no person was named).
	Person    string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Principal is who presented a token: its tenant, the token's id and its role.
type Principal struct {
	Tenant
	// TokenID is the id of the token (as listed by Tokens), recorded with decisions.
	TokenID int64
	// Role is the token's role.
	Role Role
	// Person is the person the token belongs to ("" when none was named); for an
	// external access token, its subject.
	Person string
	// Subject is an external access token's subject ("" for oncebox's own tokens,
	// whose TokenID is then 0).
	Subject string
}

// Actor describes the principal in an op's history: tenant, token id and role, and
// the token's person when it has one.
func (p *Principal) Actor() string {
	if p.Subject != "" {
		return fmt.Sprintf("%s oauth %s (%s)", p.Name, p.Subject, p.Role)
	}
	a := fmt.Sprintf("%s token %d (%s)", p.Name, p.TokenID, p.Role)
	if p.Person != "" {
		a += " " + p.Person
	}
	return a
}

// Voter identifies the principal for four-eyes rules, which count people: the token's
// person when it has one (two tokens of one person are one voter), else the token
// itself.
func (p *Principal) Voter() string {
	if p.Person != "" {
		return "person:" + p.Person
	}
	return "token:" + strconv.FormatInt(p.TokenID, 10)
}

// NormalizePerson checks and normalizes a token's person (an email or a name): trimmed,
// lower-cased, 1 to 200 characters, no control characters.
func NormalizePerson(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > 200 || strings.ContainsFunc(s, unicode.IsControl) || !utf8.ValidString(s) {
		return "", fmt.Errorf("tenant: person %q: want 1 to 200 characters without control characters (an email, say)", s)
	}
	return s, nil
}

// Store reads and writes tenants and tokens.
type Store struct {
	pool     *pgxpool.Pool
	cacheTTL time.Duration

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cachedAuth
	// listening is true while the process listens on AuthChannel for this Store: the
	// cache holds checks only then (it is emptied when listening stops).
	listening bool
	// forgets counts the times the cache was emptied, so that a check read before a
	// change is not remembered after the change emptied the cache.
	forgets uint64
	// access checks external access tokens (AcceptAccessTokens). Optional.
	access AccessTokenVerifier
	// beforeRemember, in tests, runs between a check's read and its remembering.
	beforeRemember testsignal.Hook
}

type cachedAuth struct {
	principal Principal
	expires   time.Time
}

// maxCachedTokens bounds the authentication cache; past it the cache starts over.
const maxCachedTokens = 10000

// NewStore returns a Store over pool that asks Postgres on every Authenticate.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// DefaultCacheTTL is how long serve's API may remember a token check by default (see
// NewCachingStore).
const DefaultCacheTTL = 5 * time.Second

// NewCachingStore returns a Store that remembers successful authentications for up to
// ttl, saving a query per API request, while the process listens on AuthChannel for it
// (Listening, Notified): a token revoked or changed anywhere stops working here when
// Postgres's notification arrives (at once through this Store). Without that, it asks
// Postgres every time.
func NewCachingStore(pool *pgxpool.Pool, ttl time.Duration) *Store {
	return &Store{pool: pool, cacheTTL: ttl, cache: map[[sha256.Size]byte]cachedAuth{}}
}

// HashToken returns the stored form of a token.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("tenant: random token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Create creates a tenant and its first token, an agent token, returned once.
func (s *Store) Create(ctx context.Context, name string) (*Tenant, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return nil, "", fmt.Errorf("tenant: name must be 1 to 100 characters")
	}
	var (
		t     Tenant
		token string
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, sqlInsertTenant, name).
			Scan(&t.ID, &t.Name, &t.CreatedAt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
			return fmt.Errorf("%w: %q", ErrExists, name)
		}
		if err != nil {
			return fmt.Errorf("tenant: create: %w", err)
		}
		token, err = insertToken(ctx, tx, t.ID, RoleAgent, "", "")
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return &t, token, nil
}

// Ensure returns the tenant with the given name, creating it when missing. A token is
// returned only when the tenant was created.
func (s *Store) Ensure(ctx context.Context, name string) (*Tenant, string, error) {
	t, err := s.ByName(ctx, name)
	if err == nil {
		return t, "", nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, "", err
	}
	t, token, err := s.Create(ctx, name)
	if errors.Is(err, ErrExists) {
		t, err = s.ByName(ctx, name)
		return t, "", err
	}
	return t, token, err
}

func insertToken(ctx context.Context, tx pgx.Tx, tenantID int64, role Role, person, mintedBy string) (string, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return "", err
	}
	if person != "" {
		var err error
		if person, err = NormalizePerson(person); err != nil {
			return "", err
		}
	}
	token, err := newToken()
	if err != nil {
		return "", err
	}
	if mintedBy != "" {
		// The mark is in the listed prefix, which RevokeMinted matches.
		token = mintedMark(mintedBy) + strings.TrimPrefix(token, TokenPrefix)
	}
	if _, err := tx.Exec(ctx, sqlInsertToken, tenantID, HashToken(token), token[:len(TokenPrefix)+6], role, person); err != nil {
		return "", fmt.Errorf("tenant: store token: %w", err)
	}
	return token, nil
}

// NewToken adds an agent token to the named tenant and returns it, once.
func (s *Store) NewToken(ctx context.Context, tenantName string) (string, error) {
	return s.NewTokenWithRole(ctx, tenantName, RoleAgent)
}

// NewTokenWithRole adds a token of the given role to the named tenant and returns it,
// once.
func (s *Store) NewTokenWithRole(ctx context.Context, tenantName string, role Role) (string, error) {
	return s.NewTokenFor(ctx, tenantName, role, "")
}

// NewTokenFor adds a token of the given role, belonging to person ("" for none), to the
// named tenant and returns it, once. Four-eyes rules count a person once, however many
// tokens they hold.
func (s *Store) NewTokenFor(ctx context.Context, tenantName string, role Role, person string) (string, error) {
	return s.newToken(ctx, tenantName, role, person, "")
}

// MinterDev names the tokens `oncebox dev` mints for its demo tenant (NewMintedToken):
// they start with "obx_dev.".
const MinterDev = "dev"

// minter is what a minter may be called: short enough that its mark fits in a token's
// listed prefix.
var minter = regexp.MustCompile(`^[a-z]{1,5}$`)

// mintedMark starts every token a minter makes: the token prefix, the minter's name and
// a dot, which no other token has (a token is otherwise base64url, which has no dot).
func mintedMark(name string) string { return TokenPrefix + name + "." }

// NewMintedToken adds a token of the given role to the named tenant, marked as made
// by minter (such as MinterDev: the token starts with "obx_dev."), and returns it, once.
// RevokeMinted revokes a minter's tokens and no other.
func (s *Store) NewMintedToken(ctx context.Context, tenantName string, role Role, name string) (string, error) {
	if !minter.MatchString(name) {
		return "", fmt.Errorf("tenant: a minted token names its minter, 1 to 5 lower-case letters, not %q", name)
	}
	return s.newToken(ctx, tenantName, role, "", name)
}

func (s *Store) newToken(ctx context.Context, tenantName string, role Role, person, minter string) (string, error) {
	t, err := s.ByName(ctx, tenantName)
	if err != nil {
		return "", err
	}
	var token string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		token, err = insertToken(ctx, tx, t.ID, role, person, minter)
		return err
	})
	return token, err
}

// ByName returns the tenant with the given name.
func (s *Store) ByName(ctx context.Context, name string) (*Tenant, error) {
	var t Tenant
	err := s.pool.QueryRow(ctx, sqlTenantByName, name).
		Scan(&t.ID, &t.Name, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("tenant %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant: read %q: %w", name, err)
	}
	return &t, nil
}

// List returns every tenant, by name.
func (s *Store) List(ctx context.Context) ([]Tenant, error) {
	rows, err := s.pool.Query(ctx, sqlTenants)
	if err != nil {
		return nil, fmt.Errorf("tenant: list: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tenant, error) {
		var t Tenant
		err := r.Scan(&t.ID, &t.Name, &t.CreatedAt)
		return t, err
	})
}

// Authenticate returns who presented a token (its tenant, id and role), or
// ErrUnauthorized (a *RefusedError, saying why, for an access token). A token shaped
// like an access token (AcceptAccessTokens) is checked by the verifier; oncebox's own
// tokens by their hash.
func (s *Store) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if s.access != nil && !strings.HasPrefix(token, TokenPrefix) && s.access.LooksLikeAccessToken(token) {
		return s.authenticateAccessToken(ctx, token)
	}
	if !strings.HasPrefix(token, TokenPrefix) || len(token) > 200 {
		return nil, ErrUnauthorized
	}
	hash := sha256.Sum256([]byte(token))
	var forgets uint64
	if s.cacheTTL > 0 {
		s.mu.Lock()
		c, ok := s.cache[hash]
		forgets = s.forgets
		s.mu.Unlock()
		if ok && time.Now().Before(c.expires) {
			p := c.principal
			return &p, nil
		}
	}
	var p Principal
	err := s.pool.QueryRow(ctx, sqlAuthenticate, hash[:]).Scan(&p.ID, &p.Name, &p.CreatedAt, &p.TokenID, &p.Role, &p.Person)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("tenant: authenticate: %w", err)
	}
	if s.cacheTTL > 0 {
		s.beforeRemember.Reached()
		s.mu.Lock()
		// A change announced since the read may have revoked what it found.
		if s.listening && s.forgets == forgets {
			if len(s.cache) >= maxCachedTokens {
				s.cache = map[[sha256.Size]byte]cachedAuth{}
			}
			s.cache[hash] = cachedAuth{principal: p, expires: time.Now().Add(s.cacheTTL)}
		}
		s.mu.Unlock()
	}
	return &p, nil
}

func (s *Store) forgetCached() {
	s.mu.Lock()
	s.forgetLocked()
	s.mu.Unlock()
}

func (s *Store) forgetLocked() {
	s.forgets++
	if len(s.cache) > 0 {
		s.cache = map[[sha256.Size]byte]cachedAuth{}
	}
}

// RevokeMinted revokes the live tokens of the named tenant that minter made
// (NewMintedToken) and returns how many it revoked; a token made otherwise (Create,
// NewToken, `oncebox tenant token create`) is left alone. `oncebox dev` uses it so that
// each start leaves one set of demo tokens, not one more.
func (s *Store) RevokeMinted(ctx context.Context, tenantName, name string) (int64, error) {
	defer s.forgetCached()
	if !minter.MatchString(name) {
		return 0, fmt.Errorf("tenant: revoking minted tokens needs their minter, 1 to 5 lower-case letters, not %q", name)
	}
	tag, err := s.pool.Exec(ctx, sqlRevokeMintedTokens, tenantName, mintedMark(name))
	if err != nil {
		return 0, fmt.Errorf("tenant: revoke tokens of %q: %w", tenantName, err)
	}
	return tag.RowsAffected(), nil
}

// Tokens lists the tokens of the named tenant (prefixes only).
func (s *Store) Tokens(ctx context.Context, tenantName string) ([]Token, error) {
	rows, err := s.pool.Query(ctx, sqlTokens, tenantName)
	if err != nil {
		return nil, fmt.Errorf("tenant: list tokens: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) {
		var k Token
		err := r.Scan(&k.ID, &k.TenantID, &k.Prefix, &k.Role, &k.Person, &k.CreatedAt, &k.RevokedAt)
		return k, err
	})
}

// Principal returns who a token of the named tenant is, given the whole token or its
// listed prefix (a live token), for the CLI's decisions: they name a token, not a free
// string. ErrNotFound when the tenant has no such live token.
func (s *Store) Principal(ctx context.Context, tenantName, tokenOrPrefix string) (*Principal, error) {
	if len(tokenOrPrefix) > len(TokenPrefix)+6 {
		p, err := s.Authenticate(ctx, tokenOrPrefix)
		if errors.Is(err, ErrUnauthorized) || (err == nil && p.Name != tenantName) {
			return nil, fmt.Errorf("tenant %q has no live token %s...: %w", tenantName, tokenOrPrefix[:len(TokenPrefix)+6], ErrNotFound)
		}
		return p, err
	}
	var p Principal
	err := s.pool.QueryRow(ctx, sqlTokenByPrefix, tenantName, tokenOrPrefix).Scan(&p.ID, &p.Name, &p.CreatedAt, &p.TokenID, &p.Role, &p.Person)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("tenant %q has no live token with prefix %q: %w", tenantName, tokenOrPrefix, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant: read token: %w", err)
	}
	return &p, nil
}

// RevokeToken revokes a token, given either the whole token or its listed prefix. A
// prefix must name exactly one live token.
func (s *Store) RevokeToken(ctx context.Context, tokenOrPrefix string) error {
	defer s.forgetCached()
	var tag pgconn.CommandTag
	var err error
	if len(tokenOrPrefix) > len(TokenPrefix)+6 {
		tag, err = s.pool.Exec(ctx, sqlRevokeByHash, HashToken(tokenOrPrefix))
	} else {
		var n int
		if err := s.pool.QueryRow(ctx, sqlLiveTokensByPrefix, tokenOrPrefix).Scan(&n); err != nil {
			return fmt.Errorf("tenant: revoke: %w", err)
		}
		if n > 1 {
			return fmt.Errorf("tenant: prefix %q names %d tokens; pass the whole token", tokenOrPrefix, n)
		}
		tag, err = s.pool.Exec(ctx, sqlRevokeByPrefix, tokenOrPrefix)
	}
	if err != nil {
		return fmt.Errorf("tenant: revoke: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("token: %w (or already revoked)", ErrNotFound)
	}
	return nil
}

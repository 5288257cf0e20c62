package governance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
)

// BudgetScope says whose ops a budget counts together.
type BudgetScope string

// The scopes of a budget.
const (
	// ScopeTenant counts all of a tenant's ops together.
	ScopeTenant BudgetScope = "tenant"
	// ScopeToken counts the ops of each API token apart (ops without a token are not
	// counted).
	ScopeToken BudgetScope = "token"
	// ScopeConversation counts the ops of each conversation apart. The conversation is
	// named by the agent, so the budget never depends on it alone: the ops of a token
	// that name no conversation count together, apart, and each token's ops across all
	// its conversations are capped at Budget.Conversations times the limits.
	ScopeConversation BudgetScope = "conversation"
)

// DefaultConversations is a conversation-scoped budget's Conversations when it sets
// none: a token may use ten conversations' worth of the budget per window.
const DefaultConversations = 10

// maxConversations bounds Budget.Conversations.
const maxConversations = 1_000_000

// OnExceed says what happens to an op that would exceed a budget.
type OnExceed string

// What an op over budget does.
const (
	// ExceedApproval makes the op wait for a person's approval instead of running.
	ExceedApproval OnExceed = "approval"
	// ExceedRefuse refuses the op (HTTP 429 with Retry-After); nothing is recorded.
	ExceedRefuse OnExceed = "refuse"
)

// Budget bounds what a runaway agent can do alone: how many ops, and how much money per
// currency, per window. Ops a person approved are not counted: budgets bound what runs
// without one.
type Budget struct {
	// Name identifies the budget in answers, metrics and GET /v1/budgets. Required.
	Name string `json:"name"`
	// Tool limits the budget to one tool; empty counts every tool.
	Tool string `json:"tool,omitempty"`
	// Scope is tenant (default), token or conversation.
	Scope BudgetScope `json:"scope,omitempty"`
	// Window is the length of the fixed windows the budget counts in, such as "1h" or
	// "24h" (windows start at multiples of it since 2000-01-01 UTC).
	Window Duration `json:"window"`
	// Count is how many ops a window admits (0: no count limit).
	Count int64 `json:"count,omitempty"`
	// Amount is the sum of amounts (minor units) a window admits, per lower-case
	// currency it names (0: that currency has no amount limit). "*" is one limit
	// shared by every currency the budget does not name (and amounts whose currency the
	// arguments do not say): their amounts in minor units are added together, with no
	// exchange rate, so seven currencies never get seven times the limit. Without "*",
	// an amount in a currency the budget does not name waits for a person's approval.
	// An op whose tool has an amount but whose arguments carry none (a full refund) is
	// counted at what it will move (Tool.Price), or waits for approval when that
	// cannot be known.
	Amount map[string]int64 `json:"amount,omitempty"`
	// OtherCurrencies says in words what happens to amounts in the currencies Amount
	// does not name: "shared" (they share the "*" limit, which must be set) or
	// "approval" (they wait for a person; "*" must not be set). Defaults to what Amount
	// says: "shared" with "*", "approval" without.
	OtherCurrencies OtherCurrencies `json:"other_currencies,omitempty"`
	// OnExceed is approval (default) or refuse.
	OnExceed OnExceed `json:"on_exceed,omitempty"`
	// Conversations, for a conversation-scoped budget only, caps what each API token
	// may use across all its conversations in a window at Conversations times each
	// limit, so that a new conversation id per call does not escape the budget.
	// Defaults to DefaultConversations (10).
	Conversations int64 `json:"conversations,omitempty"`
}

// ConversationsOrDefault returns how many conversations' worth of a
// conversation-scoped budget each token may use per window (0 for other scopes).
func (b Budget) ConversationsOrDefault() int64 {
	switch {
	case b.scope() != ScopeConversation:
		return 0
	case b.Conversations == 0:
		return DefaultConversations
	}
	return b.Conversations
}

// OtherCurrencies says what an amount budget does with the currencies it does not name.
type OtherCurrencies string

// What an amount budget does with the currencies it does not name.
const (
	// OthersShared: every currency the budget does not name counts against one shared
	// "*" limit (amounts in minor units added together).
	OthersShared OtherCurrencies = "shared"
	// OthersApproval: an amount in a currency the budget does not name waits for a
	// person's approval.
	OthersApproval OtherCurrencies = "approval"
)

// OtherCurrenciesOrDefault returns what the budget does with the currencies it does not
// name: shared when Amount has "*", approval otherwise ("" for a budget without
// amount limits).
func (b Budget) OtherCurrenciesOrDefault() OtherCurrencies {
	if len(b.Amount) == 0 {
		return ""
	}
	if _, ok := b.Amount[AnyCurrency]; ok {
		return OthersShared
	}
	return OthersApproval
}

// Duration is a time.Duration written as "1h30m" in JSON.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"1h\": %w", err)
	}
	v, err := ParseWindow(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Validate checks a budget.
func (b Budget) Validate() error {
	if b.Name == "" || len(b.Name) > 100 {
		return errors.New("a budget needs a name of 1 to 100 characters")
	}
	switch b.Scope {
	case "", ScopeTenant, ScopeToken, ScopeConversation:
	default:
		return fmt.Errorf("budget %s: scope %q: want tenant, token or conversation", b.Name, b.Scope)
	}
	switch b.OnExceed {
	case "", ExceedApproval, ExceedRefuse:
	default:
		return fmt.Errorf("budget %s: on_exceed %q: want approval or refuse", b.Name, b.OnExceed)
	}
	if time.Duration(b.Window) < time.Second {
		return fmt.Errorf("budget %s: window must be at least 1s", b.Name)
	}
	if b.Count < 0 {
		return fmt.Errorf("budget %s: count is negative", b.Name)
	}
	if b.Count == 0 && len(b.Amount) == 0 {
		return fmt.Errorf("budget %s: set count, amount, or both", b.Name)
	}
	if b.Conversations != 0 && b.scope() != ScopeConversation {
		return fmt.Errorf("budget %s: conversations caps a token across its conversations: it needs scope conversation", b.Name)
	}
	if b.Conversations < 0 || b.Conversations > maxConversations {
		return fmt.Errorf("budget %s: conversations %d: want 1 to %d (default %d)", b.Name, b.Conversations, maxConversations, DefaultConversations)
	}
	_, star := b.Amount[AnyCurrency]
	switch b.OtherCurrencies {
	case "":
	case OthersShared:
		if !star {
			return fmt.Errorf("budget %s: other_currencies \"shared\" needs the shared limit: add \"*\" to amount", b.Name)
		}
	case OthersApproval:
		if star {
			return fmt.Errorf("budget %s: other_currencies \"approval\" sends the currencies amount does not name to approval: remove \"*\" from amount", b.Name)
		}
	default:
		return fmt.Errorf("budget %s: other_currencies %q: want shared or approval", b.Name, b.OtherCurrencies)
	}
	for cur, n := range b.Amount {
		if cur != AnyCurrency && (len(cur) != 3 || strings.ToLower(cur) != cur) {
			return fmt.Errorf("budget %s: amount: %q is neither a lower-case currency code nor %q", b.Name, cur, AnyCurrency)
		}
		if n < 0 {
			return fmt.Errorf("budget %s: amount for %s is negative", b.Name, cur)
		}
	}
	return nil
}

// scope returns the budget's scope, tenant by default.
func (b Budget) scope() BudgetScope {
	if b.Scope == "" {
		return ScopeTenant
	}
	return b.Scope
}

// OnExceedOrDefault returns what an op over the budget does, approval by default.
func (b Budget) OnExceedOrDefault() OnExceed { return b.onExceed() }

// onExceed returns what an op over the budget does, approval by default.
func (b Budget) onExceed() OnExceed {
	if b.OnExceed == "" {
		return ExceedApproval
	}
	return b.OnExceed
}

// amountRow returns the usage row (its currency key) and the limit an amount in
// currency counts against: the currency's own when the budget names it (0: no limit),
// else the one "*" limit that every currency the budget does not name shares (amounts
// in minor units added together, whatever their currency). counted is false when the
// budget neither names the currency nor has "*": such an amount waits for approval.
func (b Budget) amountRow(currency string) (key string, limit int64, counted bool) {
	if currency != "" && currency != AnyCurrency {
		if n, ok := b.Amount[currency]; ok {
			return currency, n, true
		}
	}
	if n, ok := b.Amount[AnyCurrency]; ok {
		return AnyCurrency, n, true
	}
	return "", 0, false
}

// amountLimit returns the limit of a usage row's currency key, and whether there is one.
func (b Budget) amountLimit(key string) (int64, bool) {
	n, ok := b.Amount[key]
	return n, ok && n > 0
}

// ParseBudgets reads budgets written as a JSON list (see Budget). An empty string is
// none.
func ParseBudgets(s string) ([]Budget, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var bs []Budget
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bs); err != nil {
		return nil, fmt.Errorf("budgets: %w", err)
	}
	seen := map[string]bool{}
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return nil, err
		}
		if seen[b.Name] {
			return nil, fmt.Errorf("budgets: %s is named twice", b.Name)
		}
		seen[b.Name] = true
	}
	return bs, nil
}

// BudgetExceededError refuses an op that would exceed a budget whose OnExceed is
// refuse. Nothing was recorded; the same call may be sent again after RetryAfter.
type BudgetExceededError struct {
	Budget string
	// Sentence says which budget, in one sentence meant for the model.
	Sentence string
	// RetryAfter is when the budget's window ends.
	RetryAfter time.Duration
}

// Error implements error.
func (e *BudgetExceededError) Error() string { return e.Sentence }

// ErrBudgetExceeded matches every *BudgetExceededError.
var ErrBudgetExceeded = errors.New("budget exceeded")

// Is makes errors.Is(err, ErrBudgetExceeded) match.
func (e *BudgetExceededError) Is(target error) bool { return target == ErrBudgetExceeded }

// BudgetObserver, when the Config's Observer implements it, counts budget decisions.
type BudgetObserver interface {
	// BudgetCharged is called for each budget an op was counted against, or that it
	// would have exceeded (exceeded true).
	BudgetCharged(budget string, exceeded bool)
}

// charge is one row a budget check incremented, to undo if the op is not recorded.
type charge struct {
	budget, scope, currency string
	window                  time.Duration
	amount                  int64
	// maxOps and maxAmount bound the row: its count limit (a "" currency row) or its
	// amount limit (math.MaxInt64 for the other).
	maxOps, maxAmount int64
	// who names the scope in a sentence ("this conversation").
	who string
}

// overBudget is the first budget an op would exceed, or that cannot count it.
type overBudget struct {
	budget     Budget
	sentence   string
	retryAfter time.Duration
	// approval: the op waits for a person's approval whatever the budget's OnExceed
	// (its amount could not be priced, or its currency is one the budget does not name
	// and has no "*" for).
	approval bool
}

// opAmount is what an op moves, as a budget counts it.
type opAmount struct {
	amount   int64
	currency string
	known    bool
	// why says why the amount is not known (a sentence), when it is not.
	why string
	// deferred is the error of a price the enqueue reads before its transaction
	// (outbox.ErrAdmissionReadDeferred): the op's admission is refused, to run again
	// with the price.
	deferred error
}

// amountOf returns what the op with args of tool moves: its arguments' amount, or, for
// an op that carries none (a full refund), the tool's Price of it. An amount that
// cannot be known is never 0: known is false, and the op waits for approval.
func (g *Governance) amountOf(ctx context.Context, tool vendorapi.Tool, args json.RawMessage) opAmount {
	if a, cur, ok := tool.Amount(args); ok {
		return opAmount{amount: a, currency: cur, known: true}
	}
	if tool.Price == nil {
		return opAmount{why: fmt.Sprintf("This %s carries no amount and oncebox cannot price it", tool.Name)}
	}
	a, cur, err := tool.Price(ctx, args)
	if errors.Is(err, outbox.ErrAdmissionReadDeferred) {
		return opAmount{deferred: err}
	}
	if err != nil {
		g.cfg.Logger.Warn("cannot price an op without an amount; it waits for approval", slog.String("tool", tool.Name),
			slog.String("error", err.Error()))
		return opAmount{why: fmt.Sprintf("This %s carries no amount and oncebox cannot price it (%v)", tool.Name, err)}
	}
	if a <= 0 {
		return opAmount{why: fmt.Sprintf("This %s carries no amount and what it would move is not a positive amount (%d)", tool.Name, a)}
	}
	return opAmount{amount: a, currency: cur, known: true}
}

// chargeBudgets counts an op against every budget that applies to it, atomically (each
// usage row is locked by its upsert until the transaction ends, so concurrent enqueues
// in any process queue on it and exactly the admitted number pass). When a budget would
// be exceeded, or cannot count the op's amount, nothing is counted and the budget is
// returned.
func (g *Governance) chargeBudgets(ctx context.Context, tx pgx.Tx, op outbox.GateOp, budgets []Budget, shown func() string) ([]charge, *overBudget, error) {
	var (
		done []charge
		amt  *opAmount
	)
	for _, b := range budgets {
		if b.Tool != "" && b.Tool != op.Tool.Name {
			continue
		}
		scopes := budgetScopes(b, op)
		if len(scopes) == 0 {
			continue
		}
		rows, over, err := g.budgetRows(ctx, b, op, scopes, &amt, shown)
		if err != nil {
			return nil, nil, errors.Join(err, g.undoCharges(ctx, tx, op.Op, done))
		}
		for _, c := range rows {
			if over != nil {
				break
			}
			var ops, used int64
			err := tx.QueryRow(ctx, sqlBudgetCharge, op.Op.TenantID, c.budget, c.scope, c.currency, c.window.Seconds(), c.amount,
				c.maxOps, c.maxAmount, op.Op.ID).Scan(&ops, &used)
			if errors.Is(err, pgx.ErrNoRows) {
				over = &overBudget{budget: b, sentence: budgetSentence(b, c, op.Tool.Name), retryAfter: g.windowLeft(ctx, tx, c.window)}
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("governance: charge budget %s: %w", b.Name, err)
			}
			done = append(done, c)
		}
		if over != nil {
			if err := g.undoCharges(ctx, tx, op.Op, done); err != nil {
				return nil, nil, err
			}
			g.observeBudget(b.Name, true)
			return nil, over, nil
		}
		g.observeBudget(b.Name, false)
	}
	return done, nil, nil
}

// budgetRows returns the usage rows one budget counts the op in, one set per scope
// (each with its limits times the scope's multiple), or the overBudget that holds the
// op for a person when the budget cannot count its amount. amt is the op's amount,
// priced once for every budget.
func (g *Governance) budgetRows(ctx context.Context, b Budget, op outbox.GateOp, scopes []budgetScope, amt **opAmount,
	shown func() string) ([]charge, *overBudget, error) {
	window := time.Duration(b.Window)
	amountKey, amountLimit := "", int64(0)
	if len(b.Amount) > 0 && op.Tool.Amount != nil {
		if *amt == nil {
			a := g.amountOf(ctx, op.Tool, op.Args)
			if a.known && a.currency == "" {
				// A refund's arguments name no currency: it counts in its payment's
				// ("" when oncebox did not make the payment: "*", or a person).
				a.currency = shown()
			}
			*amt = &a
		}
		if (*amt).deferred != nil {
			return nil, nil, (*amt).deferred
		}
		if !(*amt).known {
			return nil, &overBudget{budget: b, approval: true,
				sentence: (*amt).why + fmt.Sprintf(", so the budget %q cannot count it.", b.Name)}, nil
		}
		key, limit, counted := b.amountRow((*amt).currency)
		if !counted {
			return nil, &overBudget{budget: b, approval: true, sentence: unnamedCurrencySentence(b, op.Tool.Name, (*amt).currency)}, nil
		}
		amountKey, amountLimit = key, limit
	}
	var rows []charge
	for _, s := range scopes {
		if b.Count > 0 {
			rows = append(rows, charge{budget: b.Name, scope: s.key, window: window, who: s.who,
				maxOps: timesLimit(b.Count, s.times), maxAmount: math.MaxInt64})
		}
		if amountLimit > 0 {
			rows = append(rows, charge{budget: b.Name, scope: s.key, currency: amountKey, window: window, who: s.who,
				amount: (*amt).amount, maxOps: math.MaxInt64, maxAmount: timesLimit(amountLimit, s.times)})
		}
	}
	return rows, nil, nil
}

// timesLimit is limit times n, at most math.MaxInt64.
func timesLimit(limit, n int64) int64 {
	if n > 1 && limit > math.MaxInt64/n {
		return math.MaxInt64
	}
	return limit * max(n, 1)
}

// unnamedCurrencySentence says why an amount in a currency the budget neither names nor
// covers with "*" waits.
func unnamedCurrencySentence(b Budget, tool, currency string) string {
	what := "an amount in " + currency
	if currency == "" {
		what = "an amount whose currency its arguments do not say"
	}
	return fmt.Sprintf("This %s moves %s, a currency the budget %q does not name (and it has no \"*\" limit for other "+
		"currencies), so nothing in it goes out without a person.", tool, what, b.Name)
}

// undoCharges gives back what chargeBudgets counted of an op a later budget would not
// admit, so that an op over one budget counts against none.
func (g *Governance) undoCharges(ctx context.Context, tx pgx.Tx, op *outbox.Op, done []charge) error {
	for _, c := range done {
		if _, err := tx.Exec(ctx, sqlBudgetUndo, op.TenantID, c.budget, c.scope, c.currency, c.window.Seconds(), c.amount, op.ID); err != nil {
			return fmt.Errorf("governance: undo budget charge: %w", err)
		}
	}
	return nil
}

// windowLeft is how long the current window of a budget has to run, by the database's
// clock.
func (g *Governance) windowLeft(ctx context.Context, tx pgx.Tx, window time.Duration) time.Duration {
	var secs float64
	if err := tx.QueryRow(ctx, sqlBudgetWindowLeft, window.Seconds()).Scan(&secs); err != nil {
		return window
	}
	return time.Duration(math.Ceil(secs)) * time.Second
}

func (g *Governance) observeBudget(name string, exceeded bool) {
	if g.cfg.Observer != nil {
		g.cfg.Observer.BudgetCharged(name, exceeded)
	}
}

// budgetScope is one usage row scope an op counts in, with the multiple of the
// budget's limits that bounds it.
type budgetScope struct {
	key   string
	times int64
	// who names the scope in a sentence.
	who string
}

// The prefixes of a conversation-scoped budget's usage rows: a named conversation's,
// a token's ops without one, and a token's total across all its conversations.
const (
	scopeConversationPrefix   = "conversation:"
	scopeNoConversationPrefix = "no-conversation:"
	scopeConversationsPrefix  = "conversations:"
)

// budgetScopes returns the usage rows' scopes an op counts in (none when the op is
// outside the budget: a token budget and an op without a token). A conversation is an
// id the agent chooses, so a conversation-scoped budget never depends on it alone: an
// op names its conversation's row, or, without one (or with only its MCP session's),
// its token's row of ops without a conversation; and every op also counts in its
// token's row across all its conversations, bounded at Conversations times the limit.
func budgetScopes(b Budget, op outbox.GateOp) []budgetScope {
	switch b.scope() {
	case ScopeToken:
		if op.TokenID == 0 {
			return nil
		}
		return []budgetScope{{key: "token:" + strconv.FormatInt(op.TokenID, 10), times: 1, who: "this API token"}}
	case ScopeConversation:
		token := "token:none"
		if op.TokenID != 0 {
			token = "token:" + strconv.FormatInt(op.TokenID, 10)
		}
		own := budgetScope{key: scopeNoConversationPrefix + token, times: 1, who: "the ops this API token sends without a conversation"}
		if op.Op.ConversationID != "" && !op.SessionConversation {
			own = budgetScope{key: scopeConversationPrefix + op.Op.ConversationID, times: 1, who: "this conversation"}
		}
		n := b.ConversationsOrDefault()
		return []budgetScope{own, {key: scopeConversationsPrefix + token, times: n,
			who: fmt.Sprintf("this API token across all its conversations (%d times the limit of one)", n)}}
	}
	return []budgetScope{{key: "tenant", times: 1, who: "this tenant"}}
}

// scopeTimes is the multiple of the budget's limits that bounds a usage row's scope.
func (b Budget) scopeTimes(scope string) int64 {
	if strings.HasPrefix(scope, scopeConversationsPrefix) {
		return b.ConversationsOrDefault()
	}
	return 1
}

// budgetSentence tells the model which budget it hit, in one sentence.
func budgetSentence(b Budget, c charge, tool string) string {
	per := "per " + time.Duration(b.Window).String()
	what := "ops"
	if b.Tool != "" {
		what = b.Tool + " ops"
	}
	if c.currency == "" {
		return fmt.Sprintf("This %s would exceed the budget %q of %d %s %s for %s.", tool, b.Name, c.maxOps, what, per, c.who)
	}
	limit := formatAmount(c.maxAmount, c.currency)
	if c.currency == AnyCurrency {
		limit = fmt.Sprintf("%d minor units (every currency it does not name together)", c.maxAmount)
	}
	return fmt.Sprintf("This %s would exceed the budget %q of %s in %s %s for %s.", tool, b.Name, limit, what, per, c.who)
}

// BudgetUsage is what one budget used in its current window, for one scope.
type BudgetUsage struct {
	Budget Budget
	// Source is SourceTenant for the tenant's own budget, SourceDefault for the
	// installation's.
	Source   PolicySource
	Scope    string
	Currency string // "" for the count of ops
	Used     int64
	// Limit is the window's limit; Left what remains of it.
	Limit, Left            int64
	WindowStart, WindowEnd time.Time
}

// BudgetUsage returns the tenant's usage of every budget in force for it (its own and
// the defaults it does not replace, TenantBudgets) in its current window: a row per
// scope and currency with something used, and a row per budget limit with nothing used
// yet (tenant scope).
func (g *Governance) BudgetUsage(ctx context.Context, tenantID int64) ([]BudgetUsage, error) {
	tbs, err := g.TenantBudgets(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	var out []BudgetUsage
	for _, tb := range tbs {
		u, err := g.usageOf(ctx, tenantID, tb)
		if err != nil {
			return nil, err
		}
		out = append(out, u...)
	}
	return out, nil
}

// usageOf returns the tenant's usage of one budget in its current window.
func (g *Governance) usageOf(ctx context.Context, tenantID int64, tb TenantBudget) ([]BudgetUsage, error) {
	b := tb.Budget
	window := time.Duration(b.Window)
	rows, err := g.cfg.Pool.Query(ctx, sqlBudgetUsage, tenantID, b.Name, window.Seconds())
	if err != nil {
		return nil, fmt.Errorf("governance: read budget usage: %w", err)
	}
	defer rows.Close()
	type key struct{ scope, currency string }
	seen := map[key]bool{}
	var (
		out        []BudgetUsage
		start, end time.Time
	)
	for rows.Next() {
		u := BudgetUsage{Budget: b, Source: tb.Source}
		var ops, amount int64
		if err := rows.Scan(&u.Scope, &u.Currency, &ops, &amount, &u.WindowStart, &u.WindowEnd); err != nil {
			return nil, fmt.Errorf("governance: read budget usage: %w", err)
		}
		if u.Currency == "" {
			u.Used, u.Limit = ops, b.Count
		} else {
			u.Used = amount
			u.Limit, _ = b.amountLimit(u.Currency)
		}
		u.Limit = timesLimit(u.Limit, b.scopeTimes(u.Scope))
		u.Left = max(u.Limit-u.Used, 0)
		seen[key{u.Scope, u.Currency}] = true
		start, end = u.WindowStart, u.WindowEnd
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("governance: read budget usage: %w", err)
	}
	if b.scope() != ScopeTenant {
		return out, nil
	}
	if start.IsZero() {
		if err := g.cfg.Pool.QueryRow(ctx, sqlBudgetWindow, window.Seconds()).Scan(&start, &end); err != nil {
			return nil, fmt.Errorf("governance: read budget window: %w", err)
		}
	}
	unused := BudgetUsage{Budget: b, Source: tb.Source, Scope: "tenant", WindowStart: start, WindowEnd: end}
	if b.Count > 0 && !seen[key{"tenant", ""}] {
		u := unused
		u.Limit, u.Left = b.Count, b.Count
		out = append(out, u)
	}
	curs := make([]string, 0, len(b.Amount))
	for cur := range b.Amount {
		curs = append(curs, cur)
	}
	sort.Strings(curs)
	for _, cur := range curs {
		if n := b.Amount[cur]; n > 0 && !seen[key{"tenant", cur}] {
			u := unused
			u.Currency, u.Limit, u.Left = cur, n, n
			out = append(out, u)
		}
	}
	return out, nil
}

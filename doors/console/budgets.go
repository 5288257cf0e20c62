package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// BudgetLine is one limit of a budget in force for a tenant, as the Budgets page shows
// it: a count of ops (Currency "") or an amount in one currency ("*": every currency
// the budget does not name), for one scope, in the budget's current window.
type BudgetLine struct {
	Name, Source, Tool, Scope, Currency string
	// Window is the budget's window as people write it ("24h", "7d": the caller
	// formats it, governance.FormatWindow).
	Window            string
	Used, Limit, Left int64
	WindowEnd         time.Time
	// Waiting is how many of the tenant's ops wait for a person's approval because
	// they would exceed the budget (for the whole budget, whatever the line).
	Waiting int64
}

// BudgetsFunc returns the budgets in force for a tenant and what each used.
type BudgetsFunc func(ctx context.Context, tenantID int64) ([]BudgetLine, error)

// adminOnly lets only a session of an admin token through to next; another role is
// refused with 403, as a token the console does not serve is.
func (c *Console) adminOnly(page string, next signedInFunc) signedInFunc {
	return func(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
		if s.principal.Role != tenant.RoleAdmin {
			c.refuse(w, r, c.viewFor(s, ""), http.StatusForbidden, protocol.ProblemForbidden,
				fmt.Sprintf("This session's token has the role %s; the %s page needs an admin token.", s.principal.Role, page))
			return
		}
		next(w, r, s)
	}
}

// budgets is the Budgets page: per budget limit, its window, what it used and has
// left, and how many ops wait because of it.
func (c *Console) budgets(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "budgets")
	v.Title = "Budgets"
	if c.cfg.Budgets != nil {
		lines, err := c.cfg.Budgets(r.Context(), s.principal.ID)
		if err != nil {
			c.internal(w, r, v, err)
			return
		}
		v.Budgets = lines
	}
	c.render(w, r, http.StatusOK, "budgets", v)
}

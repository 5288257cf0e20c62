package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/tenant"
)

// budgetItem is one budget's usage in its current window, as GET /v1/budgets lists it.
type budgetItem struct {
	Budget   string `json:"budget"`
	Tool     string `json:"tool"`
	Scope    string `json:"scope"`
	OnExceed string `json:"on_exceed"`
	// Source is tenant (the tenant's own budget) or default (the installation's).
	Source string `json:"source"`
	// Currency is "" for the count of ops, else the currency of an amount limit.
	Currency string `json:"currency"`
	// OtherCurrencies says what the budget does with the currencies it does not name:
	// shared (they share the "*" limit) or approval (they wait for a person).
	OtherCurrencies string    `json:"other_currencies,omitempty"`
	Used            int64     `json:"used"`
	Limit           int64     `json:"limit"`
	Left            int64     `json:"left"`
	WindowStart     time.Time `json:"window_start"`
	WindowEnd       time.Time `json:"window_end"`
}

// listBudgets is GET /v1/budgets: what each budget in force for the caller's tenant (its
// own, stored in Postgres, and the defaults) has used and has left in its current window.
func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request, t *tenant.Principal) {
	var usage []governance.BudgetUsage
	if g := s.cfg.Governance; g != nil {
		var err error
		if usage, err = g.BudgetUsage(r.Context(), t.ID); err != nil {
			s.opError(w, r, err)
			return
		}
	}
	items := make([]budgetItem, 0, len(usage))
	for _, u := range usage {
		items = append(items, budgetItem{Budget: u.Budget.Name, Tool: u.Budget.Tool, Scope: u.Scope, OnExceed: string(u.Budget.OnExceedOrDefault()),
			Source: string(u.Source), Currency: u.Currency, OtherCurrencies: string(u.Budget.OtherCurrenciesOrDefault()), Used: u.Used, Limit: u.Limit, Left: u.Left, WindowStart: u.WindowStart.UTC(), WindowEnd: u.WindowEnd.UTC()})
	}
	body, err := json.Marshal(map[string]any{"budgets": items})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// Package governance is what an embedder configures to keep a person between an agent
// and the calls it must not make alone: approval rules per tool (the installation's
// defaults, stored in Postgres so that every process reads the same rule and seeded from
// flags by SeedInstallation only where none is stored, which a tenant overrides tool by
// tool, cached and checked against the stored version), budgets that bound what runs
// without a person (the installation's stored defaults, which a tenant's own budgets,
// stored in Postgres too, replace by name and add to, cached and checked against the
// version the enqueue's insert read), and the check of a person's
// approval against the policy its op waits under. An admitted op's budget charges are
// recorded; migration 022's trigger gives them back when the op fails or is rejected,
// in the transaction of that status change.
//
// A *Governance is an outbox.Gate: set it as outbox.Config.Gate, and the enqueue asks
// it once per new op, inside its transaction, whether the op runs, waits for a
// person, or is refused (*BudgetExceededError). The op's status, its approval row,
// its dispatch job and its notification stay with package outbox, which owns the op's
// lifecycle.
//
// Package governance imports outbox (its Tool, Op and errors); outbox does not import
// it.
package governance

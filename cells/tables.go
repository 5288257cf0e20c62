package cells

// table is one table a move copies: the tenant's rows are those Where selects, with %d
// the tenant's id. The list is in copy order (a row's parents before it); a move deletes
// in the reverse order.
type table struct {
	name  string
	where string
}

const (
	ofTenant = "tenant_id = %d"
	ofOps    = "op_id IN (SELECT id FROM oncebox_op WHERE tenant_id = %d)"
	ofTokens = "token_id IN (SELECT id FROM oncebox_api_token WHERE tenant_id = %d)"
)

// tenantTables is everything of a tenant that lives in its cell. TestEveryTableDecided
// fails when a table of the schema is neither here nor in installationTables.
var tenantTables = []table{
	{"oncebox_tenant", "id = %d"},
	{"oncebox_api_token", ofTenant},
	{"oncebox_console_session", ofTokens},
	{"oncebox_console_link", ofTokens},
	{"oncebox_approval_policy", ofTenant},
	{"oncebox_tenant_budget", ofTenant},
	{"oncebox_budget_usage", ofTenant},
	{"oncebox_tenant_object", ofTenant},
	{"oncebox_tenant_vendor", ofTenant},
	{"oncebox_tenant_vendor_key", ofTenant},
	{"oncebox_vendor_owner", ofTenant},
	{"oncebox_key_window", ofTenant},
	{"oncebox_tombstone", ofTenant},
	{"oncebox_op", ofTenant},
	{"oncebox_op_ref", ofTenant},
	{"oncebox_op_due", ofOps},
	{"oncebox_attempt", ofOps},
	{"oncebox_op_event", ofOps},
	{"oncebox_approval", ofTenant},
	{"oncebox_approval_vote", ofOps},
	{"oncebox_budget_charge", ofTenant},
	{"oncebox_identity_match", ofTenant},
	{"oncebox_step_run", ofOps},
	{"oncebox_audit", ofTenant},
	{"oncebox_audit_head", ofTenant},
	{"oncebox_audit_checkpoint", ofTenant},
	{"oncebox_audit_stream", ofTenant},
}

// installationTables are the cell's own, not any one tenant's: a move leaves them.
var installationTables = map[string]string{
	"oncebox_migration":           "the cell's schema version",
	"oncebox_process":             "the cell's live processes",
	"oncebox_installation_policy": "the installation's policies, set in every cell (docs/scaling.md)",
	"oncebox_vendor_event":        "vendor events, delivered to every cell",
	"oncebox_audit_mark":          "the cell's audit sealer's low-water mark",
	"oncebox_cell":                "the directory (home cell)",
	"oncebox_cell_tenant":         "the directory",
	"oncebox_cell_self":           "the cell's own name and number",
	"oncebox_tenant_fence":        "the moves under way from this cell",
}

-- Every API token has a role: agent (enqueue and read its tenant's ops, MCP), approver
-- (read, list and decide its tenant's approvals and reviews; cannot enqueue) or admin
-- (everything an approver can do for its tenant, plus River UI and /metrics). Tokens made
-- before roles existed were used by agents: they become agent tokens.
ALTER TABLE oncebox_api_token ADD COLUMN role text NOT NULL DEFAULT 'agent'
    CHECK (role IN ('agent', 'approver', 'admin'));

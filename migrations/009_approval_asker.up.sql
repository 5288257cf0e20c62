-- Who asked for an op that waits for approval: the id of the agent's API token (NULL
-- for the Go library and stdio MCP, which have none).
ALTER TABLE oncebox_approval ADD COLUMN requested_by_token bigint;

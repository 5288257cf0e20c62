-- An operator token opens the installation-wide endpoints (River UI, and /metrics when
-- --admin-token is set): a tenant's admin token no longer does. The role check only
-- widens, so the previous release keeps working on this schema.
ALTER TABLE oncebox_api_token DROP CONSTRAINT IF EXISTS oncebox_api_token_role_check;
ALTER TABLE oncebox_api_token ADD CONSTRAINT oncebox_api_token_role_check
    CHECK (role IN ('agent', 'approver', 'admin', 'operator'));

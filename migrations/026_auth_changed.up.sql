-- A process that remembers checked API tokens (serve's --auth-cache-ttl) forgets them
-- when a token or a tenant changes anywhere: every statement that updates or deletes
-- tokens or tenants announces it on oncebox_auth_changed, at its commit, to
-- the processes listening there (tenant.Store.Watch). A revocation made through any
-- process, the CLI or plain SQL thus reaches every cache. Expand-only: a function and
-- triggers, which v0.1.0 never sees; its revocations notify this release's processes.
CREATE OR REPLACE FUNCTION oncebox_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('oncebox_auth_changed', '');
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER oncebox_api_token_auth_changed AFTER UPDATE OR DELETE ON oncebox_api_token
    FOR EACH STATEMENT EXECUTE FUNCTION oncebox_auth_changed();

CREATE OR REPLACE TRIGGER oncebox_tenant_auth_changed AFTER UPDATE OR DELETE ON oncebox_tenant
    FOR EACH STATEMENT EXECUTE FUNCTION oncebox_auth_changed();

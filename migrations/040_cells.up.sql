-- Cells (docs/scaling.md): an installation may spread its tenants over several Postgres
-- clusters, each a cell holding its tenants' ops and their River tables. Expand-only: two
-- directory tables, a fence table and its trigger function; v0.3.0's binaries never read
-- them, and a single-cell installation never writes them.
--
-- The directory lives in the home cell (the database of DATABASE_URL) and is read by
-- every `oncebox serve`; the same tables exist, empty, in every other cell. A tenant
-- without a row in oncebox_cell_tenant lives in the home cell, so today's installations
-- have nothing to fill in. Each cell has a number: its identity sequences start at
-- number << 44, so that a tenant's ids stay unique when it moves (the home cell is 0, and
-- its rows keep the ids they have).
CREATE TABLE IF NOT EXISTS oncebox_cell (
    name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9-]{0,39}$'),
    number integer NOT NULL UNIQUE CHECK (number BETWEEN 0 AND 8191),
    added_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO oncebox_cell (name, number) VALUES ('home', 0) ON CONFLICT DO NOTHING;

-- In a cell other than the home cell: its own name and number (oncebox cell add), which
-- serve checks against the directory, so that a wrong URL is refused.
CREATE TABLE IF NOT EXISTS oncebox_cell_self (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    name text NOT NULL,
    number integer NOT NULL
);

-- A tenant's cell, and the cell it is being moved to (moving_to set: its calls are
-- refused with Retry-After until the move ends).
CREATE TABLE IF NOT EXISTS oncebox_cell_tenant (
    tenant text PRIMARY KEY,
    cell text NOT NULL REFERENCES oncebox_cell (name),
    moving_to text REFERENCES oncebox_cell (name),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- In a cell: the tenants a move has fenced. While a move runs, `oncebox tenant move`
-- puts a trigger on oncebox_op (oncebox_tenant_fence, calling oncebox_tenant_fence_check; created and dropped by the move,
-- so that no enqueue pays for it otherwise) that refuses a fenced tenant's new op and
-- a person's decision on its waiting op, as "cannot connect now" (SQLSTATE 57P03): every
-- door answers it 503 with Retry-After, and the caller retries into the tenant's new
-- cell. The trigger's creation waits for every transaction writing oncebox_op, so once it
-- exists no write that missed the fence can still commit.
CREATE TABLE IF NOT EXISTS oncebox_tenant_fence (
    tenant_id bigint PRIMARY KEY,
    moving_to text NOT NULL,
    since timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION oncebox_tenant_fence_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NOT (OLD.status = 'awaiting_approval' AND NEW.status IS DISTINCT FROM OLD.status) THEN
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM oncebox_tenant_fence WHERE tenant_id = NEW.tenant_id) THEN
        RAISE EXCEPTION 'tenant % is moving to another cell; retry shortly', NEW.tenant_id
            USING ERRCODE = '57P03';
    END IF;
    RETURN NEW;
END
$$;

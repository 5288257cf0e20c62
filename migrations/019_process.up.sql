-- Every serve process of a release from v0.2.0 on registers here and beats every few
-- seconds, so that the others can tell from the database which releases are live. id is
-- the process's River client id (river_job.attempted_by holds it); protocol is the
-- dispatch protocol it speaks (internal/fleet); migration is the highest migration its
-- binary knows. A process that has not beaten for fleet's lease counts as gone. v0.1.0
-- does not register; its processes are seen by the jobs they run. Expand-only: a new
-- table, which v0.1.0 never reads.
CREATE TABLE oncebox_process (
    id         text        PRIMARY KEY,
    version    text        NOT NULL,
    commit     text        NOT NULL,
    migration  integer     NOT NULL,
    protocol   integer     NOT NULL,
    host       text        NOT NULL,
    pid        integer     NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    stopped    boolean     NOT NULL DEFAULT false
);

-- oncebox:contract
-- v0.3.0's contract of issue 46: what v0.2.0 stopped reading goes, so that a clean
-- dispatch's update of the op row is HOT (it writes no index entry of oncebox_op) and
-- River's job row no longer feeds two GIN indexes on every insert, fetch and delete.
--
-- * oncebox_op_pending, oncebox_op_unresolved, oncebox_op_review: partial indexes whose
--   predicate is on status, which every dispatch changes; since v0.2.0 the sweeper reads
--   oncebox_op_due and oncebox_op_check, the review list oncebox_op_review_since
--   (migration 036).
-- * oncebox_op_vendor_ref: on vendor_ref, which a recorded dispatch sets; since v0.2.0
--   references are read from oncebox_op_ref (migration 034).
-- * River's river_job_args_index and river_job_metadata_index (GIN): River's runtime
--   reads neither; they serve job listing filtered by args or metadata (River UI's
--   filters, JobList with a jsonb filter), which oncebox does not do: its reads by op go
--   through River's unique key (outbox.liveJobKey) and its own tables. River UI's job
--   pages work without them (TestRiverUIWithoutRiversGINIndexes, in Chromium). They cost
--   about 470 B of WAL per dispatched op (BenchmarkWAL, docs/performance.md). oncebox's
--   River client leaves them out of its reindexer's list (outbox.reindexedIndexes). A
--   River migration that recreates them would bring the cost back: the upgrade notes say
--   to drop them again.
-- * fillfactor 50 on oncebox_op: an op row is updated in place once it settles; a HOT
--   update needs room on the row's own page for the new version, and the row is wide
--   (about 300 B), so half of each new page is kept free. Measured: 71% of dispatch
--   updates HOT at 80, 100% at 50 (docs/performance.md); the price is a heap about twice
--   as large for the retention window. Pages written before this migration keep their fill.
--
-- Contract: v0.1.0's purge, sweeper and review list read these indexes, and v0.1.0 and
-- v0.2.0 move expires_at as an op settles (the purge's index; v0.3.0's clean run leaves
-- it, internal/opstate); once this is applied, binaries that do not know it refuse to run
-- (migrations.CheckSchema), and `oncebox migrate` holds it while a process of such a
-- release is live (migrations.ContractHeldError): roll the binaries first, then migrate.
--
-- Each DROP INDEX takes its table's ACCESS EXCLUSIVE lock until the migration commits, and
-- waits for every transaction that reads the table; writes queue behind it meanwhile. A
-- long reader (a finance report over a year) would stall every enqueue and dispatch for as
-- long, so the wait is bounded: after 10 s the migration fails (SQLSTATE 55P03), changes
-- nothing, and `oncebox migrate` can be run again.
SET LOCAL lock_timeout = '10s';
DROP INDEX IF EXISTS oncebox_op_pending;
DROP INDEX IF EXISTS oncebox_op_unresolved;
DROP INDEX IF EXISTS oncebox_op_review;
DROP INDEX IF EXISTS oncebox_op_vendor_ref;
DROP INDEX IF EXISTS river_job_args_index;
DROP INDEX IF EXISTS river_job_metadata_index;
ALTER TABLE oncebox_op SET (fillfactor = 50);

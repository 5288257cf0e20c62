package dispatch

import "github.com/oncebox/oncebox/internal/opstate"

// All of dispatch's SQL lives here: the claim's reads, the clean run's read, the
// release's look at a finishing job, and the liveness lock and takeover. The worker's
// queries use the op id carried by its own job. Status changes are internal/opstate's.

const opColumns = opstate.OpColumns

// sqlOpByIDForUpdate locks an op for a claim. Its last column is how long, in seconds
// on the database's clock, the latest attempt may still be running: its start plus the
// job timeout ($2, seconds) less now (0 or less: it is over), or 0 when the process of
// every open attempt is provably gone (processGoneSQL).
// Its very last column says whether the run of job $3 at job attempt $4 is clean
// (opstate.CleanRunSQL).
var sqlOpByIDForUpdate = `SELECT ` + opColumns + `, attempt_token::text, key_first_sent_at, stale_key, sealed_args,
	resend_before, coalesce(resend_before <= now(), false),
	CASE WHEN EXISTS (SELECT 1 FROM oncebox_attempt a WHERE a.op_id = o.id AND a.finished_at IS NULL)
		AND NOT EXISTS (SELECT 1 FROM oncebox_attempt a WHERE a.op_id = o.id AND a.finished_at IS NULL
			AND NOT ` + processGoneSQL("a.worker", "a.started_at") + `)
	THEN 0 ELSE coalesce(extract(epoch FROM dispatch_started_at + make_interval(secs => $2) - now()), 0)::float8 END,
	tool_definition,
	` + opstate.CleanRunSQL("$3", "$4") + `
FROM oncebox_op o WHERE id = $1 FOR UPDATE`

// Liveness (liveness.go). A process whose River client id starts with LiveClientPrefix
// holds a session advisory lock on livenessKeySQL of its id, on a connection of its own,
// while it lives; Postgres releases the lock when that connection ends, the process's
// death included.

// livenessKeySQL is the advisory lock key of the process whose client id is the SQL
// expression id.
func livenessKeySQL(id string) string {
	return `hashtextextended('oncebox.process:' || ` + id + `, 0)`
}

// livenessMargin is how long after Postgres's start a run must have started for the
// lock of its process to prove anything: the lock sessions of live processes are lost
// in a Postgres restart and taken again within livenessConfirmed, and a process calls
// no vendor unless its lock was confirmed within livenessConfirmed (Dispatcher.liveOK).
const livenessMargin = "5 seconds"

// serverSinceSQL is when this server began to hold the liveness locks of the live
// processes: its postmaster's start, or, on a promoted standby, the last transaction it
// replayed from the old primary (pg_last_xact_replay_timestamp, static once promoted).
// A standby's postmaster starts long before its promotion and holds none of the old
// primary's locks: a run fetched on the old primary, by a process still alive and not
// yet locked again on the new one, would otherwise look provably gone after a failover
// (TestNoProofOfDeathAcrossAFailover). Every such run's fetch was replayed, so it began
// before that timestamp.
const serverSinceSQL = `greatest(pg_postmaster_start_time(), coalesce(pg_last_xact_replay_timestamp(), '-infinity'))`

// processGoneSQL is the condition that the process whose client id is the SQL
// expression worker, running something that started at the expression since, is
// provably gone: it is a process that holds a liveness lock, the run started after
// the server's start (serverSinceSQL) plus livenessMargin (so that the process's lock was confirmed held
// after the start, see livenessMargin), and nobody holds the lock now. A process with
// another id (the previous release, an embedding program's own id) is never proven
// gone: its runs are waited for until their job timeout. Collisions of the 64-bit key
// can only make a gone process look alive.
func processGoneSQL(worker, since string) string {
	key := livenessKeySQL(worker)
	return `coalesce(` + worker + ` LIKE '` + LiveClientPrefix + `%' AND ` + since + ` > ` + serverSinceSQL + ` + interval '` + livenessMargin + `'
		AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
			AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
			AND l.classid = ((` + key + ` >> 32) & 4294967295)::oid AND l.objid = (` + key + ` & 4294967295)::oid), false)`
}

// sqlLivenessLock takes the process's liveness lock ($1: its client id) on its own
// connection; false when another session holds it.
var sqlLivenessLock = `SELECT pg_try_advisory_lock(` + livenessKeySQL("$1::text") + `)`

// sqlTakeOver makes the running dispatch and step runner jobs of provably gone processes
// available at once, as River's rescuer would after RescueStuckJobsAfter (a step runner's
// job does its work in one transaction, which died with its process, so its next run only
// looks at the steps again): a dispatch job's next run finds
// its op as the dead run left it and takes the locking path (a resend under the same
// key inside the vendor's window, or the reconciler). A job at its last River attempt is
// left to River's rescuer, which discards it, and a process never takes over its own
// jobs ($1: its client id). It returns the jobs taken over, their op and the process
// they were taken from.
var sqlTakeOver = `
WITH dead AS (
	SELECT j.id FROM river_job j
	WHERE j.state = 'running' AND j.kind IN ('oncebox.dispatch', 'oncebox.steps') AND j.attempt < j.max_attempts
		AND j.attempted_by[cardinality(j.attempted_by)] LIKE '` + LiveClientPrefix + `%'
		AND j.attempted_by[cardinality(j.attempted_by)] <> $1
		AND ` + processGoneSQL("j.attempted_by[cardinality(j.attempted_by)]", "j.attempted_at") + `
	FOR UPDATE SKIP LOCKED
)
UPDATE river_job j SET state = 'available', scheduled_at = now(),
	errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', j.attempt,
		'error', 'taken over: the process running it is gone (its liveness lock is free)', 'trace', '')),
	metadata = j.metadata || jsonb_build_object('oncebox:taken_over_at', now(),
		'oncebox:taken_over_from', j.attempted_by[cardinality(j.attempted_by)])
FROM dead WHERE j.id = dead.id
RETURNING j.id, coalesce(j.args->>'op_id', ''), j.attempted_by[cardinality(j.attempted_by)]`

// sqlOpForCleanRun reads a pending op for a clean run of job $2 at job attempt $3 (no
// write: River's fetch was the claim), with its key's first send, its sealed args, its
// resend_before, its tool definition and the run it heard last. No row: the op is not
// pending, is past its resend_before, or the run is not clean; the locking path decides.
var sqlOpForCleanRun = `SELECT ` + opColumns + `, key_first_sent_at, sealed_args, resend_before, tool_definition,
	heard_job_id, heard_job_attempt
FROM oncebox_op WHERE id = $1 AND status = 'pending' AND (resend_before IS NULL OR now() < resend_before)
	AND ` + opstate.CleanRunSQL("$2", "$3")

// sqlAwaitsCompletion says whether op $1's dispatch job that the op heard last is still
// running the run the op heard (migration 016): with Config.BatchedCompletion that run
// has returned and the job only waits for River's completer, so it will not look at
// the op again. Such a job is live: an insert of another one was skipped.
const sqlAwaitsCompletion = `SELECT EXISTS (SELECT 1 FROM oncebox_op o JOIN river_job j ON j.id = o.heard_job_id
	WHERE o.id = $1::uuid AND j.state = 'running' AND j.attempt = o.heard_job_attempt)`

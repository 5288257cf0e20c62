package fleet

// All of the fleet package's SQL.

const (
	// sqlRegister registers (or re-registers) a process and marks it seen now.
	sqlRegister = `INSERT INTO oncebox_process (id, version, commit, migration, protocol, host, pid)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET seen_at = now(), stopped = false`

	// sqlBeat marks a process seen now.
	sqlBeat = `UPDATE oncebox_process SET seen_at = now() WHERE id = $1`

	// sqlStop marks a process stopped (kept, so that the jobs it ran still name a
	// registered process).
	sqlStop = `UPDATE oncebox_process SET stopped = true WHERE id = $1`

	// sqlForget deletes the rows of processes gone for a day.
	sqlForget = `DELETE FROM oncebox_process WHERE seen_at < now() - interval '1 day'`

	// sqlOldest returns the lowest protocol spoken by a live process: registered ones
	// that beat within the lease ($1 seconds) and did not stop, and, as protocol
	// $2, the unregistered processes (v0.1.0) seen running a job: a running River job
	// whose last attempt names no registered process. NULL when none is live.
	sqlOldest = `SELECT least(
		(SELECT min(protocol) FROM oncebox_process
			WHERE NOT stopped AND seen_at > now() - make_interval(secs => $1)),
		(SELECT $2::int FROM river_job j
			WHERE j.state = 'running' AND j.attempted_by IS NOT NULL
			  AND NOT EXISTS (SELECT 1 FROM oncebox_process p WHERE p.id = j.attempted_by[array_upper(j.attempted_by, 1)])
			LIMIT 1))`

	// sqlLive lists the processes that beat within the lease ($1 seconds), oldest
	// protocol first.
	sqlLive = `SELECT id, version, commit, migration, protocol, host, pid, started_at, seen_at
		FROM oncebox_process WHERE NOT stopped AND seen_at > now() - make_interval(secs => $1)
		ORDER BY protocol, started_at`
)

package mutants

// List is the named mutants `make mutants` runs: each breaks one critical
// invariant of oncebox and names the tests that must catch it. When the code a
// mutant patches moves, the run fails (the patch no longer applies): refresh the
// mutant's Old and New text, never drop it silently. It is a flat list, one entry
// per mutant, grouped by the invariant broken, and long because the mutants are many.
func List() []Mutant {
	const (
		outboxPkg   = "./outbox/"
		apiPkg      = "./internal/api/"
		stripePkg   = "./vendors/stripe/"
		sendgridPkg = "./vendors/sendgrid/"
		chaosPkg    = "./cmd/oncebox-chaos/"
		serverPkg   = "./server/"
		tenantPkg   = "./tenant/"
	)
	return []Mutant{
		// The attempt-token fence.
		{
			Name:     "fence-token",
			Breaks:   "the record statement no longer checks the attempt token: a stale run overwrites a newer attempt",
			File:     "internal/opstate/queries.go",
			Old:      "WHERE id = $1 AND attempt_token = $2::uuid AND status IN ('dispatching', 'unknown')",
			New:      "WHERE id = $1 AND status IN ('dispatching', 'unknown')",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestStaleTokenIsFencedByTheToken"},
		},
		{
			Name:     "fence-completes-job",
			Breaks:   "a fenced run completes its job, so nothing looks at the op again",
			File:     "outbox/worker.go",
			Old:      "if applied, err = write(tx, true); err != nil || applied == nil {",
			New:      "if applied, err = write(tx, true); err != nil {",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestStaleTokenIsFencedByTheToken"},
		},

		// Group commit: an answer only after the commit that holds its call.
		{
			Name:     "group-commit-answers-before-commit",
			Breaks:   "a group commit answers its calls before its COMMIT: a caller may be told its op is recorded when the commit then fails or the process dies",
			File:     "outbox/group_commit.go",
			Old:      "	if c.beforeCommit != nil {\n\t\tc.beforeCommit()\n\t}",
			New:      "	for i, g := range group {\n\t\tg.answer(results[i], errs[i])\n\t}\n\tif c.beforeCommit != nil {\n\t\tc.beforeCommit()\n\t}",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestGroupCommitAnswersOnlyAfterItsCommit"},
		},
		{
			Name:     "group-commit-drops-its-jobs",
			Breaks:   "a group commit no longer inserts its calls' dispatch jobs: its ops commit and are never dispatched",
			File:     "outbox/group_commit.go",
			Old:      "	if len(batch.jobs) > 0 {",
			New:      "	if len(batch.jobs) < 0 {",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestGroupCommitAnswersOnlyAfterItsCommit", "TestGroupCommitSameKeyTwiceInOneGroup"},
		},
		{
			Name:     "group-insert-forgets-tombstone",
			Breaks:   "a group's multi-row insert no longer moves a reused purged key past its last generation: the new op sends the purged op's vendor key, and the vendor may answer with the old object",
			File:     "outbox/queries.go",
			Old:      "SELECT c.n, (SELECT t.generation FROM oncebox_tombstone t",
			New:      "SELECT c.n, (SELECT NULL::integer FROM oncebox_tombstone t",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestGroupCommitStoresWhatAnEnqueueAloneStores"},
		},
		{
			Name:     "group-commit-keeps-failed-tx",
			Breaks:   "a group goes on after a call's error that failed its transaction: the other calls of the group are lost with it",
			File:     "outbox/group_commit.go",
			Old:      "	return errors.Is(err, ErrKeyConflict) || errors.As(err, &refused)",
			New:      "	return err != nil || errors.As(err, &refused)",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestGroupCommitFailedTransactionRunsEachCallAlone"},
		},

		// The clean run's fence (no claim commit: River's fetch is the claim).
		{
			Name:     "clean-fence-job-row",
			Breaks:   "a clean run's record no longer checks that River's job row is still this run: a rescued run's answer is recorded",
			File:     "internal/opstate/queries.go",
			Old:      "	SELECT attempted_at FROM river_job WHERE id = $13 AND state = 'running' AND attempt = $14 FOR UPDATE",
			New:      "	SELECT attempted_at FROM river_job WHERE id = $13 AND $14::int IS NOT NULL FOR UPDATE",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestCleanRunRescuedIsFenced"},
		},
		{
			Name:     "clean-record-deletes-fenced-job",
			Breaks:   "a clean record deletes its River job's row even when it was fenced: the job's next run, which must treat the op as possibly sent, never comes",
			File:     "internal/opstate/queries.go",
			Old:      "	DELETE FROM river_job WHERE id = $13 AND $18::boolean AND $12::boolean AND EXISTS (SELECT 1 FROM r)",
			New:      "	DELETE FROM river_job WHERE id = $13 AND $18::boolean AND $12::boolean",
			Packages: []string{"./internal/opstate/"},
			Tests:    []string{"TestCleanRecordDeletesItsJobOnlyWhenItSettles"},
		},
		{
			Name:     "clean-record-deletes-open-job",
			Breaks:   "a clean record deletes its River job's row when the op is not terminal or the run goes on: River can no longer retry or complete it",
			File:     "internal/opstate/queries.go",
			Old:      "	DELETE FROM river_job WHERE id = $13 AND $18::boolean AND $12::boolean AND EXISTS (SELECT 1 FROM r)",
			New:      "	DELETE FROM river_job WHERE id = $13 AND EXISTS (SELECT 1 FROM r)",
			Packages: []string{"./internal/opstate/"},
			Tests:    []string{"TestCleanRecordDeletesItsJobOnlyWhenItSettles"},
		},
		{
			Name:     "takeover-woken-records",
			Breaks:   "a clean run's record checks its job's attempt but not that the job is still running: a worker that wakes up after its job was taken over (available again at the same attempt) records",
			File:     "internal/opstate/queries.go",
			Old:      "	SELECT attempted_at FROM river_job WHERE id = $13 AND state = 'running' AND attempt = $14 FOR UPDATE",
			New:      "	SELECT attempted_at FROM river_job WHERE id = $13 AND attempt = $14 FOR UPDATE",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestWokenWorkerAfterTakeoverIsFenced"},
		},
		{
			Name:     "takeover-across-failover",
			Breaks:   "a free lock proves death from the postmaster's start alone: on a promoted standby, whose postmaster is older than the failover, a live process's run fetched on the old primary is taken over at once",
			File:     "outbox/queries.go",
			Old:      "const serverSinceSQL = `greatest(pg_postmaster_start_time(), coalesce(pg_last_xact_replay_timestamp(), '-infinity'))`",
			New:      "const serverSinceSQL = `pg_postmaster_start_time()`",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestNoProofOfDeathAcrossAFailover"},
		},
		{
			Name:     "clean-run-always",
			Breaks:   "every run of a pending op counts as clean: a run after one that may have sent unheard calls the vendor again",
			File:     "internal/opstate/queries.go",
			Old:      "	return `coalesce((` + attempt + `::int = 1 AND heard_job_id IS DISTINCT FROM -1)",
			New:      "	return `coalesce(true OR (` + attempt + `::int = 1 AND heard_job_id IS DISTINCT FROM -1)",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestUncleanRunDoesNotSendOutsideTheKeyWindow"},
		},
		{
			Name:     "clean-snooze-heard",
			Breaks:   "a run that snoozes its job after its record stores its own attempt as heard: River's rerun at the same number, lost, leaves the next attempt looking clean",
			File:     "outbox/worker.go",
			Old:      "		return attempt - 1\n",
			New:      "		return attempt\n",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestSnoozedRerunLostIsNotClean"},
		},
		{
			Name:     "release-skips-finished-run",
			Breaks:   "a release for resend no longer waits for a job that recorded and awaits River's batched completer: the op is left without a job until the sweeper",
			File:     "outbox/release_job.go",
			Old:      "		if !awaits || time.Now().After(deadline) {",
			New:      "		if true || !awaits || time.Now().After(deadline) {",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestReleaseWaitsForAFinishedRun"},
		},

		// One live dispatch job per op.
		{
			Name:     "two-live-jobs-per-op",
			Breaks:   "an op may get a second live dispatch job (a resend racing a rescued job), so two runs dispatch it at once",
			File:     "outbox/enqueue.go",
			Old:      "		UniqueOpts:  river.UniqueOpts{ByArgs: true, ByState: liveJobStates()},\n",
			New:      "",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestOneLiveDispatchJobPerOp"},
		},

		{
			Name:     "another-tenants-object",
			Breaks:   "an op may act on an object another tenant's op made (a pasted payment_intent refunds someone else's payment)",
			File:     "outbox/ownership.go",
			Old:      "	if owned {\n		return nil\n	}\n	refused := &NotOwnedError{Arg: o.Arg, ID: id}\n",
			New:      "	if owned || !owned {\n		return nil\n	}\n	refused := &NotOwnedError{Arg: o.Arg, ID: id}\n",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestObjectsOfAnOpStayTheTenantsAfterThePurge"},
		},

		// An enqueue decides under the approval rule in force.
		{
			Name:     "stale-approval-rule",
			Breaks:   "an enqueue decides under the tenant's approval rule this process remembers, after another process changed it: an op skips the approval now required",
			File:     "governance/policy_cache.go",
			Old:      "if tr, ok := g.policies.get(tenantID, tool); ok && tr.version == version {",
			New:      "if tr, ok := g.policies.get(tenantID, tool); ok {",
			Packages: []string{outboxPkg, "./governance/"},
			Tests:    []string{"TestEnqueueSeesARuleChangedByAnotherProcess", "TestRememberedRuleIsCheckedAgainstTheStoredVersion"},
		},

		// The API's cache of checked tokens.
		{
			Name:     "auth-cache-ignores-notifications",
			Breaks:   "a process that remembers checked tokens no longer forgets them when a token changes elsewhere: a token revoked through another process keeps working for the cache's whole TTL",
			File:     "tenant/watch.go",
			Old:      "\t\ts.forgetCached()\n\t}\n}",
			New:      "\t}\n}",
			Packages: []string{tenantPkg, serverPkg},
			Tests:    []string{"TestCachingStoreRevocation", "TestTokenRevokedElsewhereStopsAtOnce"},
		},
		{
			Name:     "auth-cache-without-watch",
			Breaks:   "the token cache serves while nobody listens for token changes: a revocation elsewhere goes unnoticed for the cache's TTL",
			File:     "tenant/tenant.go",
			Old:      "if s.listening && s.forgets == forgets {",
			New:      "if s.forgets == forgets {",
			Packages: []string{tenantPkg},
			Tests:    []string{"TestCachingStoreRevocation"},
		},
		{
			Name:     "auth-cache-remembers-stale-check",
			Breaks:   "a token check read before a revocation is remembered after the revocation emptied the cache: the revoked token keeps working for the cache's TTL",
			File:     "tenant/tenant.go",
			Old:      "if s.listening && s.forgets == forgets {",
			New:      "if s.listening && s.forgets >= forgets {",
			Packages: []string{tenantPkg},
			Tests:    []string{"TestCachingStoreForgetsACheckReadBeforeARevocation"},
		},

		// Tenant scoping of every op query.
		{
			Name:     "tenant-enqueue",
			Breaks:   "an enqueue answers with another tenant's op stored under the same key",
			File:     "outbox/queries.go",
			Old:      "WHERE tenant_id = $1 AND idempotency_key = $2 AND NOT EXISTS (SELECT 1 FROM ins)",
			New:      "WHERE idempotency_key = $2 AND NOT EXISTS (SELECT 1 FROM ins)",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestEnqueueTenantsAreIndependent"},
		},
		{
			Name:     "tenant-get-by-key",
			Breaks:   "a tenant reads another tenant's op by key",
			File:     "outbox/queries.go",
			Old:      "const sqlOpByKey = `SELECT ` + opColumns + ` FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2`",
			New:      "const sqlOpByKey = `SELECT ` + opColumns + ` FROM oncebox_op WHERE $1::bigint IS NOT NULL AND idempotency_key = $2`",
			Packages: []string{apiPkg},
			Tests:    []string{"TestTenantsAreIsolated"},
		},
		{
			Name:     "tenant-get-by-id",
			Breaks:   "a tenant reads another tenant's op by id",
			File:     "outbox/queries.go",
			Old:      "FROM oncebox_op WHERE tenant_id = $1 AND id = $2::uuid`",
			New:      "FROM oncebox_op WHERE $1::bigint IS NOT NULL AND id = $2::uuid`",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestGetByIDIsScopedToTheTenant"},
		},
		{
			Name:     "tenant-history-attempts",
			Breaks:   "a tenant reads another tenant's attempts",
			File:     "outbox/queries.go",
			Old:      "WHERE o.tenant_id = $1 AND a.op_id = $2 ORDER BY a.id`",
			New:      "WHERE $1::bigint IS NOT NULL AND a.op_id = $2 ORDER BY a.id`",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestHistoryIsScopedToTheTenant"},
		},
		{
			Name:     "tenant-history-events",
			Breaks:   "a tenant reads another tenant's events",
			File:     "outbox/queries.go",
			Old:      "WHERE o.tenant_id = $1 AND e.op_id = $2 ORDER BY e.id`",
			New:      "WHERE $1::bigint IS NOT NULL AND e.op_id = $2 ORDER BY e.id`",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestHistoryIsScopedToTheTenant"},
		},
		{
			Name:     "tenant-approve",
			Breaks:   "a tenant approves or rejects another tenant's op",
			File:     "outbox/queries.go",
			Old:      "FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2 FOR UPDATE`",
			New:      "FROM oncebox_op WHERE $1::bigint IS NOT NULL AND idempotency_key = $2 FOR UPDATE`",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestApproveIsScopedToTheTenant"},
		},
		{
			Name:     "tenant-review-resolve",
			Breaks:   "a person resolves another tenant's op in review",
			File:     "outbox/queries.go",
			Old:      "FROM oncebox_op\nWHERE tenant_id = $1 AND idempotency_key = $2 FOR UPDATE`",
			New:      "FROM oncebox_op\nWHERE $1::bigint IS NOT NULL AND idempotency_key = $2 FOR UPDATE`",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestManualResolutions"},
		},

		// Approval role checks.
		{
			Name:     "role-agent-decides",
			Breaks:   "an agent token approves the op its own approval gate holds",
			File:     "tenant/tenant.go",
			Old:      "func (r Role) CanDecide() bool { return r == RoleApprover || r == RoleAdmin }",
			New:      "func (r Role) CanDecide() bool { return r != \"\" }",
			Packages: []string{apiPkg},
			Tests:    []string{"TestAgentTokenCannotDecide"},
		},
		{
			Name:     "role-approve-route-unchecked",
			Breaks:   "the approve route takes any token of the tenant",
			File:     "internal/api/server.go",
			Old:      `s.mux.HandleFunc("POST /v1/ops/{key}/approve", s.authed(canDecide, s.approveOp))`,
			New:      `s.mux.HandleFunc("POST /v1/ops/{key}/approve", s.authed(canRead, s.approveOp))`,
			Packages: []string{apiPkg},
			Tests:    []string{"TestAgentTokenCannotDecide"},
		},
		{
			Name:     "role-approver-enqueues",
			Breaks:   "an approver token records ops, so one person both asks and approves",
			File:     "tenant/tenant.go",
			Old:      "func (r Role) CanEnqueue() bool { return r == RoleAgent }",
			New:      "func (r Role) CanEnqueue() bool { return r != \"\" }",
			Packages: []string{apiPkg},
			Tests:    []string{"TestApproverDecidesButCannotEnqueue"},
		},

		// The fingerprint covers the args.
		{
			Name:     "fingerprint-args",
			Breaks:   "the fingerprint ignores the args: another payload under the same key replays the first op",
			File:     "outbox/fingerprint.go",
			Old:      "}{tool, args})",
			New:      "}{tool, json.RawMessage(`null`)})",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestEnqueueConcurrentConflictingPayloads"},
		},

		// Identity: a reworded MCP call is the op already asked for.
		{
			Name:     "identity-ignored",
			Breaks:   "minted MCP keys come from the whole payload again: a reworded description is a second payment",
			File:     "internal/mcpserver/tool_call.go",
			Old:      "identity, declared, err := s.ob.IdentityFingerprint(tool, args)",
			New:      "identity, declared, err := fp, false, error(nil)",
			Packages: []string{"./internal/mcpserver/"},
			Tests:    []string{"TestRewordedCallIsTheSameOperation"},
		},
		{
			Name:     "identity-match-refused",
			Breaks:   "a call matched by identity with other arguments is refused as a key conflict instead of answered with the op",
			File:     "outbox/enqueue.go",
			Old:      "if !params.ByIdentity {",
			New:      "if true {",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestIdentityMatchIsRecordedNotRefused"},
		},
		{
			Name:     "identity-v010-window-dropped",
			Breaks:   "the payload's key window v0.1.0 opened is no longer read or kept: a retry crossing a rolling upgrade is a second op",
			File:     "internal/mcpserver/tool_call.go",
			Old:      "key, err := s.ob.KeyByIdentity(ctx, tenantID, call, payload, windowKey(call), window)",
			New:      "key, err := s.ob.KeyByIdentity(ctx, tenantID, call, \"\", windowKey(call), window)",
			Packages: []string{"./internal/mcpserver/"},
			Tests:    []string{"TestIdentityKeysMeetV010Keys"},
		},

		// The lookup's tag filter.
		{
			Name:     "reconcile-adopts-other-ops-object",
			Breaks:   "the reconciler adopts a looked-up object tagged for another op, or untagged",
			File:     "outbox/sweep_decide.go",
			Old:      "		if o.OpID == c.id {",
			New:      "		if true {",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestSweepAdoptsOnlyObjectsTaggedWithTheOp"},
		},
		{
			Name:     "stripe-list-scan-tag-filter",
			Breaks:   "the Stripe list scan keeps payment intents of other ops",
			File:     "vendors/stripe/lookup.go",
			Old:      "if pi := it.PaymentIntent(); pi.Metadata[outbox.TagKey] == p.OpID {",
			New:      "if pi := it.PaymentIntent(); pi != nil {",
			Packages: []string{stripePkg},
			Tests:    []string{"TestLookupPaymentIntentByTag", "TestLookupListScanFindsFreshPaymentIntentAtOnce", "TestLookupListScanPages"},
		},

		// The lookup lag.
		{
			Name:     "reconcile-ignores-lookup-lag",
			Breaks:   "an empty lookup is trusted inside the vendor's lag: an op is resent while its object is merely not visible yet",
			File:     "outbox/sweep_decide.go",
			Old:      "	if a.askedAt.Before(visibleFrom) {",
			New:      "	if false {",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestSweepWaitsWithinTheLookupLag", "TestSweepWaitsOutAnAttemptThatNeverFinished"},
		},

		// Stripe's Idempotency-Key.
		{
			Name:     "stripe-no-idempotency-key",
			Breaks:   "payment intents go to Stripe without oncebox's Idempotency-Key",
			File:     "vendors/stripe/stripe.go",
			Old:      "	params := paymentIntentParams(a, p.OpID)\n	params.Context = ctx\n	params.SetIdempotencyKey(p.VendorKey)\n",
			New:      "	params := paymentIntentParams(a, p.OpID)\n	params.Context = ctx\n",
			Packages: []string{stripePkg},
			Tests:    []string{"TestDispatchPaymentIntentSendsKeyTagAndParams", "TestDispatchSameKeyIsReplayed"},
		},
		{
			Name:     "stripe-refund-no-idempotency-key",
			Breaks:   "refunds go to Stripe without oncebox's Idempotency-Key",
			File:     "vendors/stripe/stripe.go",
			Old:      "	params := refundParams(a, p.OpID)\n	params.Context = ctx\n	params.SetIdempotencyKey(p.VendorKey)\n",
			New:      "	params := refundParams(a, p.OpID)\n	params.Context = ctx\n",
			Packages: []string{stripePkg},
			Tests:    []string{"TestDispatchRefund"},
		},

		// Outcome classification.
		{
			Name:     "timeout-as-not-sent",
			Breaks:   "a timeout after the request was written is taken for a request never sent, and resent blindly",
			File:     "outbox/vendor.go",
			Old:      "	case isTimeout(err):\n		return &DispatchError{Outcome: OutcomeUnknown, Code: \"timeout\", Unanswered: true,",
			New:      "	case isTimeout(err):\n		return &DispatchError{Outcome: OutcomeRetryable, Code: \"not_sent\", Unanswered: false,",
			Packages: []string{stripePkg},
			Tests:    []string{"TestDispatchTimeoutIsUnknown"},
		},
		{
			Name:     "sendgrid-429-permanent",
			Breaks:   "SendGrid's 429 is taken for a refusal: a valid email ends failed",
			File:     "vendors/sendgrid/classify.go",
			Old:      `de.Outcome, de.Code, de.Message = outbox.OutcomeRetryable, "rate_limited",`,
			New:      `de.Outcome, de.Code, de.Message = outbox.OutcomePermanent, "rate_limited",`,
			Packages: []string{sendgridPkg},
			Tests:    []string{"TestClassifySend"},
		},
		{
			Name:     "stripe-lookup-unavailable",
			Breaks:   "Stripe lookups always answer unavailable: the reconciler is blind and every unknown Stripe op goes to review",
			File:     "vendors/stripe/lookup.go",
			Old:      "	if err != nil {\n		return nil, err\n	}\n	for i := range objs {\n		objs[i].Refused =",
			New:      "	if err == nil {\n		err = fmt.Errorf(\"stripe: %w\", outbox.ErrLookupUnavailable)\n	}\n	if err != nil {\n		return nil, err\n	}\n	for i := range objs {\n		objs[i].Refused =",
			Packages: []string{stripePkg},
			Tests:    []string{"TestLookupPaymentIntentByTag", "TestLookupRefundByTag"},
		},

		// A refund's approval threshold is its payment's currency's.
		{
			Name:     "refund-threshold-without-currency",
			Breaks:   "a refund (no currency in its arguments) is compared with no currency's threshold: under a rule with a USD threshold only, every refund goes out without a person",
			File:     "governance/policy.go",
			Old:      "		if currency == \"\" {\n			currency = shown()\n		}\n		limit, found := r.Above[currency]",
			New:      "		limit, found := r.Above[currency]",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestRefundComparedInItsPaymentsCurrency"},
		},

		// A vendor request given up on is dropped with its connection, not delivered late.
		{
			Name:     "vendor-transport-graceful-close",
			Breaks:   "the vendors' connections close gracefully: a request held back by a cut network is sent once it heals, after the worker gave up on it and resent it",
			File:     "internal/vendorhttp/transport.go",
			Old:      "if err := tc.SetLinger(0); err != nil {",
			New:      "if err := tc.SetLinger(-1); err != nil {",
			Packages: []string{"./internal/vendorhttp/", "./vendors/webhook/"},
			Tests:    []string{"TestAGivenUpRequestNeverArrives", "TestDefaultTransportAbortsOnClose"},
		},

		// Upstream MCP tools: a lost answer is unknown, never resent blindly.
		{
			Name:     "upstream-lost-answer-resent",
			Breaks:   "an upstream MCP call whose answer was lost is retried as if nothing was sent: a second side effect",
			File:     "vendors/mcpupstream/calls.go",
			Old:      `return &outbox.DispatchError{Outcome: outbox.OutcomeUnknown, Code: "no_answer", Unanswered: true,`,
			New:      `return &outbox.DispatchError{Outcome: outbox.OutcomeRetryable, Code: "no_answer",`,
			Packages: []string{serverPkg},
			Tests:    []string{"TestUpstreamDropAfterActingIsFoundByLookup"},
		},
		{
			Name:     "upstream-transport-failure-as-answer",
			Breaks:   "the SDK's transport failure (JSON-RPC -32005) is taken for the upstream's answer: a native-keys upstream's lost answer is not resent under its key",
			File:     "vendors/mcpupstream/session.go",
			Old:      "if !errors.As(err, &we) || we.Code == codeRejectedByTransport {",
			New:      "if !errors.As(err, &we) {",
			Packages: []string{serverPkg},
			Tests:    []string{"TestUpstreamNativeKeysResendInsideWindow"},
		},
		{
			Name:     "upstream-tool-loosened",
			Breaks:   "an upstream's tools/list_changed turns an approval-gated tool into a read tool: it runs with no approval",
			File:     "vendors/catalog/live.go",
			Old:      "		if lo, ok := loosens(old, nt); ok {\n			next.cat.Tools[name] = old\n",
			New:      "		if lo, ok := loosens(old, nt); ok && false {\n			next.cat.Tools[name] = old\n",
			Packages: []string{serverPkg},
			Tests:    []string{"TestUpstreamListChangedCannotLoosenATool"},
		},
		{
			Name:     "upstream-garbage-breaks-session",
			Breaks:   "one call's malformed upstream answer reaches the SDK's client, which breaks the session: a concurrent write already carried out goes unknown",
			File:     "vendors/mcpupstream/raw_tap.go",
			Old:      "			if why != \"\" {\n				t.tap.spoil(call, why)",
			New:      "			if why == answerTooLarge {\n				t.tap.spoil(call, why)",
			Packages: []string{serverPkg},
			Tests:    []string{"TestUpstreamGarbageFailsOnlyItsCall"},
		},
		{
			Name:     "upstream-garbled-lookup-unavailable",
			Breaks:   "a lookup answered with garbage is taken for an upstream that cannot be asked: an op whose answer was lost goes to needs_review instead of being looked up again",
			File:     "vendors/mcpupstream/calls.go",
			Old:      "if we, answered := upstreamError(err); answered && !refusedAsMalformed(we) {",
			New:      "if we, answered := upstreamError(err); answered && we != nil {",
			Packages: []string{serverPkg},
			Tests:    []string{"TestUpstreamGarbledLookupLooksAgain"},
		},

		// Rolling upgrades: the mixed-version switch (internal/fleet).
		{
			Name:     "mixed-version-switch-dropped",
			Breaks:   "a run ignores that a process of an older release is live and makes a clean run (no claim commit) beside it",
			File:     "outbox/worker.go",
			Old:      "return ob.cfg.ClaimCommit || (ob.cfg.MixedVersions != nil && ob.cfg.MixedVersions())",
			New:      "return ob.cfg.ClaimCommit",
			Packages: []string{outboxPkg},
			Tests:    []string{"TestMixedVersionsCommitTheClaim"},
		},
		{
			Name:     "mixed-version-unregistered-unseen",
			Breaks:   "the fleet no longer sees v0.1.0 processes (unregistered) by the jobs they run: new processes make clean runs beside them",
			File:     "internal/fleet/queries.go",
			Old:      "AND NOT EXISTS (SELECT 1 FROM oncebox_process p WHERE p.id = j.attempted_by[array_upper(j.attempted_by, 1)])",
			New:      "AND false",
			Packages: []string{"./internal/fleet/"},
			Tests:    []string{"TestMixedWhileAnOlderProcessIsLive"},
		},

		// The chaos harness's own counting and verdict.
		{
			Name:     "chaos-mails-by-tag",
			Breaks:   "the chaos harness counts emails by op tag instead of by message id: every duplicate email hidden",
			File:     "cmd/oncebox-chaos/fakes.go",
			Old:      "		if seen[m.XMessageID] {\n			continue\n		}\n		seen[m.XMessageID] = true",
			New:      "		if seen[m.CustomArgs[outbox.TagKey]] {\n			continue\n		}\n		seen[m.CustomArgs[outbox.TagKey]] = true",
			Packages: []string{chaosPkg},
			Tests:    []string{"TestObjectsSeeDuplicatesOfEveryKind"},
		},
		{
			Name:     "chaos-verdict-ignores-unplanned",
			Breaks:   "the chaos verdict lets valid requests end failed or in review",
			File:     "cmd/oncebox-chaos/check.go",
			Old:      "len(r.ConflictLeaks) == 0 && len(r.Unplanned) == 0 &&",
			New:      "len(r.ConflictLeaks) == 0 &&",
			Packages: []string{chaosPkg},
			Tests:    []string{"TestCheckUnplannedFailureAndReview"},
		},
		{
			Name:     "chaos-verdict-excuses-upstream-failures",
			Breaks:   "the chaos verdict lets any upstream MCP op end failed, refused by the upstream or not",
			File:     "cmd/oncebox-chaos/check.go",
			Old:      "if planned && !plan.Declined && !in.Refused[op.ID] {",
			New:      "if planned && !plan.Declined && op.Tool != toolMCP {",
			Packages: []string{chaosPkg},
			Tests:    []string{"TestCheckUpstreamMCPOps"},
		},
		{
			Name:     "chaos-verdict-ignores-double-202",
			Breaks:   "the chaos verdict lets a key be answered 202 twice",
			File:     "cmd/oncebox-chaos/check.go",
			Old:      "len(r.Unplanned) == 0 && len(r.Double202) == 0",
			New:      "len(r.Unplanned) == 0",
			Packages: []string{chaosPkg},
			Tests:    []string{"TestCheckDouble202"},
		},
		{
			Name:     "chaos-verdict-ignores-unapproved-runs",
			Breaks:   "the chaos verdict lets the gated tool run for an op the harness rejected or left waiting",
			File:     "cmd/oncebox-chaos/check.go",
			Old:      "		case !in.Approved[op.Key]:",
			New:      "		case false && !in.Approved[op.Key]:",
			Packages: []string{chaosPkg},
			Tests:    []string{"TestCheckGate"},
		},
		{
			Name:     "chaos-verdict-ignores-contagion",
			Breaks:   "the chaos verdict lets an op none of whose calls was garbled end in needs_review while the upstream garbles",
			File:     "cmd/oncebox-chaos/check.go",
			Old:      "op.Status == statusNeedsReview && in.GarbageSeen && in.Garbled[op.ID] == 0",
			New:      "op.Status == statusNeedsReview && in.GarbageSeen && in.Garbled[op.ID] < 0",
			Packages: []string{chaosPkg},
			Tests:    []string{"TestCheckContagion"},
		},
	}
}

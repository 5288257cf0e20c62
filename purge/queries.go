package purge

// sqlPurgeKeyWindows deletes closed key windows.
const sqlPurgeKeyWindows = `DELETE FROM oncebox_key_window WHERE closes_at < now()`

// sqlPurgeBudgetUsage deletes budget windows that ended more than an hour ago.
const sqlPurgeBudgetUsage = `DELETE FROM oncebox_budget_usage WHERE window_end < now() - interval '1 hour'`

-- The trace context an op was created under (a W3C traceparent: the enqueue's span, or
-- the caller's when oncebox does not trace), so that its dispatch, in whatever process
-- and however late, continues that trace, and support finds the trace from the key.
ALTER TABLE oncebox_op ADD COLUMN IF NOT EXISTS trace_parent text;

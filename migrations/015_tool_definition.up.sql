-- An op keeps the definition of the tool it was accepted under: the tool catalog's
-- tools (package catalog) can change on reload or restart, and an op already accepted
-- is dispatched as it was defined then (its method, path and target), never
-- re-validated or re-routed. NULL for the built-in tools, whose definition is the
-- code's. Opaque to the outbox: the tool's vendor reads it back (DispatchParams).
ALTER TABLE oncebox_op ADD COLUMN tool_definition jsonb;

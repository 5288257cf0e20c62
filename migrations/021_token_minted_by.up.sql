-- Who minted a token, when not an operator: 'dev' for the demo tokens `oncebox dev`
-- mints at each start. dev revokes those of its earlier runs, never a token made with
-- `oncebox tenant token create` (NULL here). Only a column is added: the previous
-- release ignores it.
ALTER TABLE oncebox_api_token ADD COLUMN IF NOT EXISTS minted_by text;

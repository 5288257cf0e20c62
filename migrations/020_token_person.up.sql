-- A token may belong to a named person (an approver's email, say): four-eyes rules count
-- people, so two tokens of one person are one voter. Tokens without a person count as
-- their own voter, as before. Only a column is added: the previous release ignores it.
ALTER TABLE oncebox_api_token ADD COLUMN IF NOT EXISTS person text;

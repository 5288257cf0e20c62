-- A dispatch run whose op is pending and clean calls its vendor without a claim commit:
-- River's fetch, which committed the job running with its new attempt number, is the
-- durable "about to call" marker. heard_job_id and heard_job_attempt name the last run
-- (River job id, job attempt) whose answer was recorded. A run of job J at attempt A
-- is clean when no earlier run may have called the vendor unheard: A = 1 (the job's
-- first run), or J = heard_job_id and A = heard_job_attempt + 1. Any other run takes
-- the locking path, which treats the op as possibly sent. heard_job_id = -1 marks an op
-- whose gone dispatch job may have run unheard (set by the sweeper). NULL on ops
-- stored before; both columns are nullable, so this adds no rewrite.
ALTER TABLE oncebox_op ADD COLUMN heard_job_id bigint, ADD COLUMN heard_job_attempt integer;

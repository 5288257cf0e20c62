-- A pending op whose last request went out unanswered (it may have been carried out) is
-- resent under the same vendor key only while the vendor still remembers that key:
-- resend_before is the end of that window. Past it, the op goes to the reconciler
-- instead of being sent. NULL: nothing was sent that might have been carried out.
ALTER TABLE oncebox_op ADD COLUMN resend_before timestamptz;

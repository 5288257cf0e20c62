package reconcile

// Stats counts what one sweep did.
type Stats struct {
	// Looked is how many unknown ops were looked up at the vendor.
	Looked int
	// Succeeded and Failed count ops resolved from the one object the vendor holds.
	Succeeded, Failed int
	// Resent counts ops sent back to pending because the vendor holds nothing.
	Resent int
	// Waiting counts ops whose lookup lag is not over yet.
	Waiting int
	// NeedsReview counts ops handed to a person (duplicates and unavailable lookups
	// included).
	NeedsReview int
	// Duplicates counts ops for which the vendor holds two or more objects.
	Duplicates int
	// LookupErrors counts failed lookups, to be retried.
	LookupErrors int
	// Stuck counts ops moved from dispatching to unknown.
	Stuck int
	// Rejobbed counts pending ops given a new dispatch job; JobsDiscarded pending ops
	// sent to review because their job was discarded or cancelled.
	Rejobbed, JobsDiscarded int
	// Skipped counts ops a worker or a person resolved while their lookup ran.
	Skipped int
}

func (s *Stats) add(o Stats) {
	s.Looked += o.Looked
	s.Succeeded += o.Succeeded
	s.Failed += o.Failed
	s.Resent += o.Resent
	s.Waiting += o.Waiting
	s.NeedsReview += o.NeedsReview
	s.Duplicates += o.Duplicates
	s.LookupErrors += o.LookupErrors
	s.Stuck += o.Stuck
	s.Rejobbed += o.Rejobbed
	s.JobsDiscarded += o.JobsDiscarded
	s.Skipped += o.Skipped
}

package finance

import (
	"fmt"
	"time"
)

// The bounds of a report's window: vendors are listed over it, so a window they could
// not hold, or one so long that listing it would take hours, is refused before any
// vendor is asked.
var (
	// EarliestReport is the earliest start of a window.
	EarliestReport = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	// MaxReportAhead is how far past now a window may end.
	MaxReportAhead = 24 * time.Hour
	// MaxReportWindow is the longest window: a year (a leap year's included).
	MaxReportWindow = 366 * 24 * time.Hour
)

// CheckWindow says, in a sentence for the person who chose them, why since and until
// do not make a report window (nil when they do): a start before EarliestReport, an
// end more than MaxReportAhead after now, a start not before the end, or a window
// longer than MaxReportWindow. The console, the CLI and anything else that takes a
// window from a person call it before BuildReport.
func CheckWindow(since, until, now time.Time) error {
	switch {
	case since.Before(EarliestReport):
		return fmt.Errorf("the window starts %s, before %s: no vendor holds records that old", day(since), day(EarliestReport))
	case until.After(now.Add(MaxReportAhead)):
		return fmt.Errorf("the window ends %s, more than a day after now: choose an end no later than %s", day(until), day(now.Add(MaxReportAhead)))
	case !since.Before(until):
		return fmt.Errorf("the window's start (%s) must come before its end (%s)", since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	case until.Sub(since) > MaxReportWindow:
		return fmt.Errorf("the window is %d days long, more than a year: report a year or less at a time", int(until.Sub(since).Hours()/24))
	}
	return nil
}

// day shows a time as a date, whatever its year.
func day(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%04d-%02d-%02d", t.Year(), t.Month(), t.Day())
}

package governance

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseWindow reads a budget's window as people write it: a Go duration ("90m", "24h",
// "1h30m") or a whole number of days ("1d", "7d").
func ParseWindow(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n <= 0 || n > 3660 {
			return 0, fmt.Errorf("%q is not a window such as 1h, 24h or 7d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a window such as 1h, 24h or 7d", s)
	}
	return d, nil
}

// FormatWindow writes a budget's window as people write it: two or more whole days as
// "2d" or "7d", otherwise without its zero units ("24h0m0s" is "24h", "1h30m0s" is
// "1h30m", "90s" is "1m30s").
func FormatWindow(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

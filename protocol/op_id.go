package protocol

import "strings"

// IsOpID reports whether s has the form of an op's id (the "id" of the HTTP API's
// op): a UUID in its 36-character text form, hexadecimal digits of either case in
// groups of 8-4-4-4-12. A vendor object's "oncebox_op" tag of another form names no
// op.
func IsOpID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

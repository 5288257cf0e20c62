// Package latevendor proves what a vendor transport does with a request it gave up on
// while the network held it back: DeliversAfterCancel runs a TLS vendor speaking HTTP/2
// and HTTP/1.1 that stalls, lets the client give up, reads again and says whether the
// whole request still came (internal/vendorhttp's package doc tells why it matters).
// Linux only: the vendor's small receive buffers are set with setsockopt.
package latevendor

package server

import (
	"context"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// VendorForTest returns the configured adapter of a vendor, as the outbox got it.
func (s *Server) VendorForTest(name string) (vendorapi.Vendor, bool) {
	for _, v := range s.adapters {
		if v.Name() == name {
			return v, true
		}
	}
	return nil, false
}

// RouteForTest is the router's choice of cell for a bearer token ("" and a problem
// when it refuses).
func (c *Cells) RouteForTest(ctx context.Context, token string) (string, *protocol.Problem) {
	return c.route(ctx, token)
}

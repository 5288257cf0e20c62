package server

import (
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

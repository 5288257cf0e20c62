package outbox

import "github.com/oncebox/oncebox/vendorapi"

// The vendor contract lives in package vendorapi, which imports only the standard
// library, so that an adapter links neither pgx nor River. These aliases keep the
// embedding API of earlier releases compiling: Config.Vendors is a []Vendor,
// NewRegistry takes Tools, and Enqueue's refusals of arguments match ErrInvalidArgs and
// *ValidationError. New code names them from vendorapi.

// Vendor is vendorapi.Vendor, the type of Config.Vendors.
type Vendor = vendorapi.Vendor

// Tool is vendorapi.Tool, what NewRegistry takes.
type Tool = vendorapi.Tool

// ValidationError is vendorapi.ValidationError, the error of arguments a tool refuses.
type ValidationError = vendorapi.ValidationError

// ErrInvalidArgs is vendorapi.ErrInvalidArgs, matched by every *ValidationError.
var ErrInvalidArgs = vendorapi.ErrInvalidArgs

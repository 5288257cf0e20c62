package api

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document describing the API, as served at
// /openapi.json. The caller gets its own copy.
func OpenAPI() []byte { return bytes.Clone(openAPIDoc) }

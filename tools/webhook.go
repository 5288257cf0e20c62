package tools

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/oncebox/oncebox/protocol"
)

// maxWebhookPathLen bounds a webhook path, query included.
const maxWebhookPathLen = 2048

var webhookFields = []string{"target", "path", "body"}

// DecodeWebhook decodes and validates the shape of the arguments of webhook.post.
// It does not check the target against an allow-list: the Validate of the tool
// built by Builtin does. Unknown fields are refused. Its errors are
// *vendorapi.ValidationError.
func DecodeWebhook(args json.RawMessage) (protocol.WebhookArgs, error) {
	f, err := readArgs(args, webhookFields)
	if err != nil {
		return protocol.WebhookArgs{}, err
	}
	var a protocol.WebhookArgs
	if a.Target, err = f.required("target"); err != nil {
		return protocol.WebhookArgs{}, err
	}
	if a.Path, err = f.required("path"); err != nil {
		return protocol.WebhookArgs{}, err
	}
	if msg := checkWebhookPath(a.Path); msg != "" {
		return protocol.WebhookArgs{}, invalid(f.at("path"), msg)
	}
	a.Body = f.values["body"]
	return a, nil
}

// checkWebhookPath returns why p is not an acceptable path on a target, or "".
func checkWebhookPath(p string) string {
	switch {
	case len(p) > maxWebhookPathLen:
		return fmt.Sprintf("must be at most %d characters long; got %d", maxWebhookPathLen, len(p))
	case !strings.HasPrefix(p, "/"):
		return `must start with "/" (a path on the target, not a URL)`
	case strings.HasPrefix(p, "//"):
		return `must not start with "//" (the target, not the path, decides scheme and host)`
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }):
		return "must not contain spaces, control characters or backslashes"
	case strings.Contains(p, "#"):
		return "must not contain a fragment (#)"
	}
	path, _, _ := strings.Cut(p, "?")
	for seg := range strings.SplitSeq(path, "/") {
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return "must be a valid URL path (bad percent-encoding)"
		}
		for part := range strings.FieldsFuncSeq(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
			if part == ".." {
				return `must not contain ".." segments`
			}
		}
	}
	return ""
}

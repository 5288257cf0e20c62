package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"

	"github.com/oncebox/oncebox/protocol"
)

// SendGrid's limits on one message.
const (
	maxRecipients  = 1000
	maxSubjectLen  = 998
	maxCategories  = 10
	maxCategoryLen = 255
)

var (
	mailFields    = []string{"from", "to", "subject", "text", "html", "template_id", "dynamic_template_data", "categories"}
	addressFields = []string{"email", "name"}
)

// DecodeMail decodes and validates the arguments of sendgrid.mail. Unknown fields
// are refused. Its errors are *vendorapi.ValidationError.
func DecodeMail(args json.RawMessage) (protocol.MailArgs, error) {
	f, err := readArgs(args, mailFields)
	if err != nil {
		return protocol.MailArgs{}, err
	}
	var a protocol.MailArgs
	if !f.has("from") {
		return protocol.MailArgs{}, invalid(f.at("from"), "is required")
	}
	if a.From, err = readAddress(f.at("from"), f.values["from"]); err != nil {
		return protocol.MailArgs{}, err
	}
	if a.To, err = readRecipients(f); err != nil {
		return protocol.MailArgs{}, err
	}
	if a.TemplateID, err = f.nonEmpty("template_id"); err != nil {
		return protocol.MailArgs{}, err
	}
	if a.Subject, err = f.nonEmpty("subject"); err != nil {
		return protocol.MailArgs{}, err
	}
	if a.Subject == "" && a.TemplateID == "" {
		return protocol.MailArgs{}, invalid(f.at("subject"), "is required unless template_id is given")
	}
	if n := chars(a.Subject); n > maxSubjectLen {
		return protocol.MailArgs{}, invalid(f.at("subject"), fmt.Sprintf("must be at most %d characters long; got %d", maxSubjectLen, n))
	}
	if a.Text, err = f.nonEmpty("text"); err != nil {
		return protocol.MailArgs{}, err
	}
	if a.HTML, err = f.nonEmpty("html"); err != nil {
		return protocol.MailArgs{}, err
	}
	if a.Text == "" && a.HTML == "" && a.TemplateID == "" {
		return protocol.MailArgs{}, invalid(f.at("text"), "is required unless html or template_id is given")
	}
	if f.has("dynamic_template_data") {
		field := f.at("dynamic_template_data")
		if a.TemplateID == "" {
			return protocol.MailArgs{}, invalid(field, "is allowed only with template_id")
		}
		if a.DynamicTemplateData, err = readAnyObject(field, f.values["dynamic_template_data"]); err != nil {
			return protocol.MailArgs{}, err
		}
	}
	if a.Categories, err = readCategories(f); err != nil {
		return protocol.MailArgs{}, err
	}
	return a, nil
}

// readRecipients reads args.to.
func readRecipients(f fields) ([]protocol.Address, error) {
	path := f.at("to")
	if !f.has("to") {
		return nil, invalid(path, "is required")
	}
	items, err := readArray(path, "addresses", f.values["to"])
	if err != nil {
		return nil, err
	}
	switch {
	case len(items) == 0:
		return nil, invalid(path, "must have at least 1 recipient")
	case len(items) > maxRecipients:
		return nil, invalid(path, fmt.Sprintf("must have at most %d recipients; got %d", maxRecipients, len(items)))
	}
	to := make([]protocol.Address, len(items))
	seen := make(map[string]int, len(items))
	for i, item := range items {
		if to[i], err = readAddress(index(path, i), item); err != nil {
			return nil, err
		}
		key := strings.ToLower(to[i].Email)
		if j, dup := seen[key]; dup {
			return nil, invalid(index(path, i)+".email", "duplicates "+index(path, j)+".email (SendGrid refuses a recipient listed twice)")
		}
		seen[key] = i
	}
	return to, nil
}

// readAddress reads an {"email": ..., "name": ...} object at path.
func readAddress(path string, raw json.RawMessage) (protocol.Address, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return protocol.Address{}, invalid(path, "must be an object with email and an optional name")
	}
	obj, err := readObject(path, raw, addressFields)
	if err != nil {
		return protocol.Address{}, err
	}
	var a protocol.Address
	if a.Email, err = obj.required("email"); err != nil {
		return protocol.Address{}, err
	}
	if p, err := mail.ParseAddress(a.Email); err != nil || p.Address != a.Email || p.Name != "" {
		return protocol.Address{}, invalid(obj.at("email"), "must be a bare email address such as ada@example.com (put a display name in name)")
	}
	if a.Name, err = obj.str("name"); err != nil {
		return protocol.Address{}, err
	}
	return a, nil
}

// readAnyObject decodes raw as a JSON object of any values, keeping numbers as
// json.Number.
func readAnyObject(path string, raw json.RawMessage) (map[string]any, error) {
	if _, err := readObject(path, raw, nil); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, invalid(path, "must be a JSON object")
	}
	return m, nil
}

// readCategories reads args.categories.
func readCategories(f fields) ([]string, error) {
	if !f.has("categories") {
		return nil, nil
	}
	path := f.at("categories")
	items, err := readArray(path, "strings", f.values["categories"])
	if err != nil {
		return nil, err
	}
	if len(items) > maxCategories {
		return nil, invalid(path, fmt.Sprintf("must have at most %d categories; got %d", maxCategories, len(items)))
	}
	cats := make([]string, len(items))
	for i, item := range items {
		at := index(path, i)
		if cats[i], err = readString(at, item); err != nil {
			return nil, err
		}
		c := cats[i]
		if len(c) == 0 || len(c) > maxCategoryLen {
			return nil, invalid(at, fmt.Sprintf("must be 1 to %d characters long", maxCategoryLen))
		}
		for _, b := range []byte(c) {
			if b < 0x20 || b > 0x7e {
				return nil, invalid(at, "must be printable ASCII")
			}
		}
		for j := range i {
			if cats[j] == c {
				return nil, invalid(at, "duplicates "+index(path, j))
			}
		}
	}
	return cats, nil
}

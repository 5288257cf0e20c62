package fakesendgrid

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/mail"
	"slices"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/devkit/fakefault"
)

const (
	maxBodyBytes       = 30 << 20 // SendGrid's 30 MB per message.
	maxRecipients      = 1000     // Across all personalizations, to + cc + bcc.
	maxCustomArgsBytes = 10000    // Total custom_args must stay under this.
	maxCategories      = 10
	maxCategoryLen     = 255
)

// sendRequest is the subset of the v3 mail/send body the fake validates.
type sendRequest struct {
	Personalizations []sendPersonalization `json:"personalizations"`
	From             *sendAddress          `json:"from"`
	Subject          string                `json:"subject"`
	Content          []sendContent         `json:"content"`
	TemplateID       string                `json:"template_id"`
	Categories       []string              `json:"categories"`
	CustomArgs       map[string]any        `json:"custom_args"`
	Headers          map[string]string     `json:"headers"`
}

type sendPersonalization struct {
	To                  []sendAddress     `json:"to"`
	CC                  []sendAddress     `json:"cc"`
	BCC                 []sendAddress     `json:"bcc"`
	Subject             string            `json:"subject"`
	Headers             map[string]string `json:"headers"`
	CustomArgs          map[string]any    `json:"custom_args"`
	DynamicTemplateData map[string]any    `json:"dynamic_template_data"`
}

type sendAddress struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

type sendContent struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

func (s *Server) handleMailSend(w http.ResponseWriter, r *http.Request) {
	fault := s.nextFault()
	log := s.cfg.Logger.With(slog.String("fault", fault.Kind.String()))

	switch fault.Kind {
	case Fault429:
		log.Debug("fakesendgrid: send rate limited")
		writeRateLimited(w, s.cfg.Now().Add(fault.RateLimitReset), 0)
		return
	case Fault500NotStored:
		log.Debug("fakesendgrid: send failed before storing")
		writeErrors(w, http.StatusInternalServerError, apiError{Message: "internal server error"})
		return
	case FaultDropBeforeAccept:
		log.Debug("fakesendgrid: connection dropped before storing")
		fakefault.DropConnection(w)
		return
	}

	body, err := readBody(w, r)
	if err != nil {
		log.Debug("fakesendgrid: unreadable send body", slog.String("error", err.Error()))
		switch {
		case errors.Is(err, errTooLarge):
			writeErrors(w, http.StatusRequestEntityTooLarge, apiError{Message: "The JSON payload you have included in your request is too large."})
		case errors.Is(err, errBadGzip):
			writeErrors(w, http.StatusBadRequest, apiError{Message: "The request body could not be decompressed as gzip."})
		default:
			writeErrors(w, http.StatusBadRequest, apiError{Message: "The request body could not be read."})
		}
		return
	}
	msg, apiErr := parseSendRequest(body)
	if apiErr != nil {
		log.Debug("fakesendgrid: send rejected", slog.String("message", apiErr.Message))
		writeErrors(w, http.StatusBadRequest, *apiErr)
		return
	}
	msg.XMessageID = newMessageID()
	msg.Headers = requestHeaders(r.Header)
	msg.AcceptedAt = s.cfg.Now()
	s.storeSent(msg)
	log = log.With(slog.String("x_message_id", msg.XMessageID))

	switch fault.Kind {
	case FaultAcceptThenDrop:
		log.Debug("fakesendgrid: send stored, connection dropped")
		fakefault.DropConnection(w)
		return
	case Fault500Stored:
		log.Debug("fakesendgrid: send stored, answering 500")
		writeErrors(w, http.StatusInternalServerError, apiError{Message: "internal server error"})
		return
	case FaultHang:
		log.Debug("fakesendgrid: send stored, hanging", slog.Duration("hang_for", s.cfg.HangFor))
		t := time.NewTimer(s.cfg.HangFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	log.Debug("fakesendgrid: send accepted")
	w.Header().Set("X-Message-Id", msg.XMessageID)
	w.WriteHeader(http.StatusAccepted)
}

var (
	errTooLarge = errors.New("request body over 30 MB")
	errBadGzip  = errors.New("request body is not valid gzip")
)

// readBody reads the request body, gunzipping it when Content-Encoding says
// gzip, and fails with errTooLarge past maxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, errTooLarge
		}
		return nil, fmt.Errorf("read body: %w", err)
	}
	if r.Header.Get("Content-Encoding") != "gzip" {
		return body, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadGzip, err)
	}
	body, err = io.ReadAll(io.LimitReader(zr, maxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadGzip, err)
	}
	if len(body) > maxBodyBytes {
		return nil, errTooLarge
	}
	return body, nil
}

// parseSendRequest validates a v3 mail/send body the way SendGrid does and
// returns the message to store, or the first error SendGrid would report.
func parseSendRequest(body []byte) (Message, *apiError) {
	var req sendRequest
	if err := json.Unmarshal(body, &req); err != nil {
		if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && typeErr.Field != "" {
			return Message{}, fieldError(typeErr.Field, fmt.Sprintf("Invalid type. Expected: %s, given: %s.", typeErr.Type, typeErr.Value))
		}
		return Message{}, &apiError{Message: "Bad Request"}
	}

	if len(req.Personalizations) == 0 {
		return Message{}, fieldError("personalizations", "The personalizations field is required and must have at least one personalization.")
	}
	if req.From == nil || req.From.Email == "" {
		return Message{}, fieldError("from", "The from object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.")
	}
	if !validEmail(req.From.Email) {
		return Message{}, fieldError("from.email", "The from email does not contain a valid address.")
	}

	var (
		to         []string
		recipients int
		argsBytes  int
	)
	everySubject := true
	for i, p := range req.Personalizations {
		at := "personalizations." + strconv.Itoa(i)
		if len(p.To) == 0 {
			return Message{}, fieldError(at+".to", "The to array is required for all personalization objects, and must have at least one email object with a valid email address.")
		}
		for _, list := range []struct {
			name  string
			addrs []sendAddress
		}{{"to", p.To}, {"cc", p.CC}, {"bcc", p.BCC}} {
			for j, a := range list.addrs {
				if !validEmail(a.Email) {
					return Message{}, fieldError(fmt.Sprintf("%s.%s.%d.email", at, list.name, j), "Does not contain a valid address.")
				}
			}
		}
		for _, a := range p.To {
			to = append(to, a.Email)
		}
		recipients += len(p.To) + len(p.CC) + len(p.BCC)
		everySubject = everySubject && p.Subject != ""
		n, apiErr := customArgsSize(at+".custom_args", p.CustomArgs)
		if apiErr != nil {
			return Message{}, apiErr
		}
		argsBytes += n
	}
	if recipients > maxRecipients {
		return Message{}, fieldError("personalizations", fmt.Sprintf("The total number of recipients across all personalizations must be %d or fewer; got %d.", maxRecipients, recipients))
	}

	if req.TemplateID == "" {
		if req.Subject == "" && !everySubject {
			return Message{}, fieldError("subject", "The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.")
		}
		if len(req.Content) == 0 {
			return Message{}, fieldError("content", "Unless a valid template_id is provided, the content parameter is required. There must be at least one defined content block.")
		}
	}
	for i, c := range req.Content {
		if c.Type == "" {
			return Message{}, fieldError(fmt.Sprintf("content.%d.type", i), "The content type must be provided.")
		}
		if c.Value == "" {
			return Message{}, fieldError(fmt.Sprintf("content.%d.value", i), "The content value must be a string at least one character in length.")
		}
	}

	if len(req.Categories) > maxCategories {
		return Message{}, fieldError("categories", fmt.Sprintf("Too many categories: at most %d are allowed.", maxCategories))
	}
	for i, c := range req.Categories {
		if c == "" || len(c) > maxCategoryLen {
			return Message{}, fieldError(fmt.Sprintf("categories.%d", i), fmt.Sprintf("A category must be 1 to %d characters long.", maxCategoryLen))
		}
	}

	n, apiErr := customArgsSize("custom_args", req.CustomArgs)
	if apiErr != nil {
		return Message{}, apiErr
	}
	if argsBytes += n; argsBytes >= maxCustomArgsBytes {
		return Message{}, fieldError("custom_args", fmt.Sprintf("The custom_args must total less than %d bytes; got %d.", maxCustomArgsBytes, argsBytes))
	}

	first := req.Personalizations[0]
	subject := req.Subject
	if first.Subject != "" {
		subject = first.Subject
	}
	var args map[string]string
	for _, src := range []map[string]any{req.CustomArgs, first.CustomArgs} {
		for k, v := range src {
			if args == nil {
				args = make(map[string]string)
			}
			args[k] = v.(string) // customArgsSize checked the type.
		}
	}
	return Message{
		From:       req.From.Email,
		To:         to,
		Subject:    subject,
		Categories: req.Categories,
		TemplateID: req.TemplateID,
		CustomArgs: args,
	}, nil
}

// customArgsSize checks that every custom arg is a string and returns the
// bytes its keys and values take.
func customArgsSize(field string, args map[string]any) (int, *apiError) {
	n := 0
	for _, k := range slices.Sorted(maps.Keys(args)) {
		s, ok := args[k].(string)
		if !ok {
			return 0, fieldError(field+"."+k, "Custom args must be strings.")
		}
		n += len(k) + len(s)
	}
	return n, nil
}

// validEmail accepts a bare address such as "a@example.com".
func validEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s && a.Name == ""
}

// requestHeaders returns the first value of every request header except
// Authorization, which holds the API key.
func requestHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if k == "Authorization" || len(v) == 0 {
			continue
		}
		out[k] = v[0]
	}
	return out
}

package sendgrid

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/sendgrid/rest"
	sg "github.com/sendgrid/sendgrid-go"
	"github.com/sendgrid/sendgrid-go/helpers/mail"
	"golang.org/x/time/rate"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// mailSendPath is SendGrid's v3 send endpoint.
const mailSendPath = "/v3/mail/send"

// Vendor dispatches sendgrid.mail ops to SendGrid's v3 API and finds them again
// through the Email Activity API. It satisfies vendorapi.Vendor and is safe for
// concurrent use.
type Vendor struct {
	cfg    Config
	client *rest.Client
	// activity spaces the requests to the Email Activity API.
	activity *rate.Limiter
}

var _ vendorapi.Vendor = (*Vendor)(nil)

// New returns a Vendor configured by cfg, or an error saying how to fix cfg.
func New(cfg Config) (*Vendor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	limit := rate.Limit(rate.Inf)
	if cfg.ActivityRatePerMinute > 0 {
		limit = rate.Every(time.Minute / time.Duration(cfg.ActivityRatePerMinute))
	}
	return &Vendor{
		cfg:    cfg,
		client: &rest.Client{HTTPClient: cfg.HTTPClient},
		// A burst of 1 keeps any rolling minute within the limit, as SendGrid counts.
		activity: rate.NewLimiter(limit, 1),
	}, nil
}

// Name returns "sendgrid", the vendor name of the sendgrid.mail tool.
func (v *Vendor) Name() string { return tools.VendorSendGrid }

// Idempotency says that SendGrid has no idempotency keys: every send that reaches
// it is another email.
func (v *Vendor) Idempotency() vendorapi.Idempotency { return vendorapi.Idempotency{} }

// LookupLag returns Config.LookupLag: how long the Email Activity API may still
// miss a message after it was sent.
func (v *Vendor) LookupLag() time.Duration { return v.cfg.LookupLag }

// Dispatch sends the op's email with one POST /v3/mail/send, tagged with the op's
// id in custom_args (TagKey, on the message and its personalization). It never
// retries by itself and sends no Idempotency-Key header: SendGrid ignores one,
// and Go's HTTP client would take it as leave to resend the POST on a fresh
// connection when a kept-alive one dies, which is a second email. Every error is
// an *vendorapi.DispatchError.
func (v *Vendor) Dispatch(ctx context.Context, params vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	log := v.cfg.Logger.With(append(tracing.SpanLogAttrs(ctx), slog.String("op_id", params.OpID), slog.Int("attempt", params.Attempt),
		slog.String("vendor_account", params.Account.Ref))...)
	args, err := tools.DecodeMail(params.Args)
	if err != nil {
		// Nothing was sent; the same arguments can never be sent.
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_args",
			Message: "the op's arguments are not a valid sendgrid.mail: " + err.Error(), Err: err}
	}

	// A subuser's mail goes out with the subuser's own key: Mail Send ignores
	// on-behalf-of.
	key := v.key(params.Account)
	req := sg.GetRequest(key, mailSendPath, v.cfg.BaseURL)
	req.Method = rest.Post
	req.Body = mail.GetRequestBody(buildMail(args, params.OpID))

	// wrote says whether the latest connection attempt wrote the whole request.
	// net/http may try a second connection on its own, but only when nothing was
	// written to the first, so each attempt starts afresh at GetConn. It is set
	// from the transport's goroutines.
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		GetConn: func(string) { wrote.Store(false) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	}
	sendCtx, cancel := context.WithTimeout(httptrace.WithClientTrace(ctx, trace), v.cfg.Timeout)
	defer cancel()

	start := time.Now()
	resp, err := v.client.SendWithContext(sendCtx, req)
	a := sendAnswer{err: err, wrote: wrote.Load(), now: time.Now()}
	if resp != nil && resp.StatusCode != 0 {
		// A status came back: it decides, even if reading the body then failed.
		a.status, a.header, a.body = resp.StatusCode, http.Header(resp.Headers), []byte(resp.Body)
	}
	res, de := classifySend(a)
	if de != nil {
		de = scrub(scrub(de, v.cfg.APIKey), key)
		log.Debug("sendgrid: send failed", slog.String("outcome", de.Outcome.String()), slog.String("code", de.Code),
			slog.Int("status", de.HTTPStatus), slog.Duration("took", time.Since(start)))
		return nil, de
	}
	log.Debug("sendgrid: send accepted", slog.String("x_message_id", res.VendorRef), slog.Int("status", a.status),
		slog.Duration("took", time.Since(start)))
	return res, nil
}

// buildMail is the v3 mail/send body for args, tagged with opID: one
// personalization with every recipient, text/plain then text/html content, the
// template and its data, the categories.
func buildMail(args protocol.MailArgs, opID string) *mail.SGMailV3 {
	m := mail.NewV3Mail()
	m.SetFrom(mail.NewEmail(args.From.Name, args.From.Email))
	m.Subject = args.Subject
	p := mail.NewPersonalization()
	for _, to := range args.To {
		p.AddTos(mail.NewEmail(to.Name, to.Email))
	}
	if args.Text != "" {
		m.AddContent(mail.NewContent("text/plain", args.Text))
	}
	if args.HTML != "" {
		m.AddContent(mail.NewContent("text/html", args.HTML))
	}
	if args.TemplateID != "" {
		m.SetTemplateID(args.TemplateID)
		for k, val := range args.DynamicTemplateData {
			p.SetDynamicTemplateData(k, val)
		}
	}
	if len(args.Categories) > 0 {
		m.AddCategories(args.Categories...)
	}
	// The tag on both levels: the personalization's wins in SendGrid, the
	// message's survives anyone adding personalizations later.
	p.SetCustomArg(vendorapi.TagKey, opID)
	m.SetCustomArg(vendorapi.TagKey, opID)
	m.AddPersonalizations(p)
	return m
}

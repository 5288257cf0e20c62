package fakesendgrid_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/sendgrid/sendgrid-go"
	"github.com/sendgrid/sendgrid-go/helpers/mail"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
)

// Example sends one email through the real SDK, finds it again through the
// Email Activity API, and shows that a dropped connection still sent an email.
func Example() {
	fake := fakesendgrid.New(fakesendgrid.Config{})
	srv := httptest.NewServer(fake)
	defer srv.Close()

	m := mail.NewSingleEmail(
		mail.NewEmail("Shop", "shop@example.com"), "Your receipt",
		mail.NewEmail("Ann", "ann@example.com"), "Thank you.", "<p>Thank you.</p>")
	m.SetCustomArg("oncebox_op", "op_1")

	send := sendgrid.GetRequest("SG.key", "/v3/mail/send", srv.URL)
	send.Method = "POST"
	send.Body = mail.GetRequestBody(m)
	resp, err := sendgrid.MakeRequest(send)
	if err != nil {
		panic(err)
	}
	fmt.Println("send:", resp.StatusCode, len(resp.Headers["X-Message-Id"][0]))

	search := sendgrid.GetRequest("SG.key", "/v3/messages", srv.URL)
	search.Method = "GET"
	search.QueryParams = map[string]string{"limit": "10", "query": `(unique_args['oncebox_op']="op_1")`}
	resp, err = sendgrid.MakeRequest(search)
	if err != nil {
		panic(err)
	}
	var found struct {
		Messages []struct {
			ToEmail string `json:"to_email"`
			Status  string `json:"status"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &found); err != nil {
		panic(err)
	}
	fmt.Println("activity:", resp.StatusCode, found.Messages)

	fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
	_, err = sendgrid.MakeRequest(send)
	fmt.Println("dropped:", err != nil, "emails sent:", fake.SendCount())

	// Output:
	// send: 202 22
	// activity: 200 [{ann@example.com delivered}]
	// dropped: true emails sent: 2
}

package sendgrid_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
)

// Example sends one tagged email to a fake SendGrid and finds it again by its
// op's id through the Email Activity API.
func Example() {
	fake := fakesendgrid.New(fakesendgrid.Config{})
	srv := httptest.NewServer(fake)
	defer srv.Close()

	sg, err := sendgrid.New(sendgrid.Config{APIKey: "SG.example", BaseURL: srv.URL})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, err := sg.Dispatch(ctx, vendorapi.DispatchParams{
		OpID: "op_1",
		Tool: "sendgrid.mail",
		Args: json.RawMessage(`{"from": {"email": "shop@example.com"}, "to": [{"email": "ann@example.com"}, {"email": "bob@example.com"}],
			"subject": "Your receipt", "text": "Thank you."}`),
	})
	if err != nil {
		panic(err)
	}
	found, err := sg.Lookup(ctx, vendorapi.LookupParams{OpID: "op_1"})
	if err != nil {
		panic(err)
	}
	fmt.Println("emails sent:", fake.SendCount())
	fmt.Println("found:", len(found.Objects), found.Objects[0].ID == res.VendorRef, found.Objects[0].OpID)
	// Output:
	// emails sent: 1
	// found: 1 true op_1
}

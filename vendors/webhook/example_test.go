package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

func ExampleVendor_Dispatch() {
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	defer srv.Close()

	v, err := webhook.New(webhook.Config{
		Targets: map[string]webhook.Target{
			"crm": {BaseURL: srv.URL, SecretHeader: "X-Webhook-Secret", Secret: "whsec_example"},
		},
		LookupPath: "/_lookup",
	})
	if err != nil {
		panic(err)
	}
	res, err := v.Dispatch(context.Background(), vendorapi.DispatchParams{
		OpID:      "op_1",
		Args:      json.RawMessage(`{"target":"crm","path":"/contacts","body":{"email":"a@example.com"}}`),
		VendorKey: "vk_1",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.VendorRef, string(res.Result))

	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault500AfterEffect})
	_, err = v.Dispatch(context.Background(), vendorapi.DispatchParams{
		OpID:      "op_2",
		Args:      json.RawMessage(`{"target":"crm","path":"/contacts"}`),
		VendorKey: "vk_2",
	})
	var de *vendorapi.DispatchError
	if errors.As(err, &de) {
		fmt.Println(de.Outcome, de.Code)
	}

	found, err := v.Lookup(context.Background(), vendorapi.LookupParams{OpID: "op_2", Args: json.RawMessage(`{"target":"crm"}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(found.Objects), found.Objects[0].ID)
	// Output:
	// fx_000001 {"status":200,"body":{"id":"fx_000001","ok":true}}
	// unknown http_5xx
	// 1 fx_000002
}

package client_test

import (
	"fmt"

	"github.com/oncebox/oncebox/client"
)

// ExampleAgentSession_Key shows that a session mints the same key for the same tool
// call every time, so a retry of the call (by the agent, its framework or this client)
// is recognised by oncebox as the same op.
func ExampleAgentSession_Key() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:8080", Token: "obx_example"})
	if err != nil {
		panic(err)
	}
	s := c.Session("conversation-42")
	first := s.Key("call_abc")
	retry := c.Session("conversation-42").Key("call_abc")
	other := s.Key("call_def")
	fmt.Println(first == retry, first == other, len(first) <= 255)
	// Output: true false true
}

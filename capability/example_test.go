package capability_test

import (
	"fmt"

	"github.com/orchd/orchd/capability"
)

// ExampleBuild reads a 0.3 card and shows what orchd decides on.
func ExampleBuild() {
	card := []byte(`{
	  "name": "Weather Agent",
	  "protocolVersion": "0.3.0",
	  "url": "https://weather.example.com/a2a",
	  "preferredTransport": "JSONRPC",
	  "capabilities": {
	    "streaming": true,
	    "extensions": [{"uri": "https://a2a-protocol.org/extensions/steering/v1", "params": {"steerable": true}}]
	  },
	  "skills": [{"id": "forecast", "name": "Forecast", "tags": ["weather"]}]
	}`)
	p, err := capability.Build(card, capability.Options{ID: "weather"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ok, _ := p.Compatible(">= 0.3, < 2.0")
	fmt.Println(p.Versions(capability.BindingJSONRPC), p.ClientCompatible, ok)
	fmt.Println(p.Supports("streaming_message"), p.Steering.Steerable, p.Steering.Interruptible)
	// Output:
	// [0.3] true true
	// true true false
}

// ExampleDiff shows a capability removed without deprecation.
func ExampleDiff() {
	old, _ := capability.Build([]byte(`{"name":"A","url":"https://a.example.com","capabilities":{"pushNotifications":true}}`), capability.Options{})
	cur, _ := capability.Build([]byte(`{"name":"A","url":"https://a.example.com","capabilities":{}}`), capability.Options{})
	d := capability.Diff(old, cur)
	fmt.Println(d.Removed, d.Violations)
	// Output:
	// [push_notifications] [push_notifications was removed without being deprecated first]
}

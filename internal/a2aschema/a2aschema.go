// Package a2aschema compiles the AgentCard definition of the A2A 1.0.0
// JSON schema bundle kept in orchestrator/testdata/a2a-schema, for the
// tests that check orchd's cards against it.
package a2aschema

import (
	"fmt"
	"os"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// base is where the bundle's definitions are registered, each under the
// file name its $refs use.
const base = "https://a2a-protocol.org/v1.0.0/spec/"

// AgentCard compiles the "Agent Card" definition of the schema bundle at
// path, with every definition it refers to. The bundle's root has no
// constraints of its own: a card must be validated against this
// definition, not the root.
func AgentCard(path string) (*jsonschema.Schema, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("A2A schema: %w", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("A2A schema %s: %w", path, err)
	}
	root, _ := doc.(map[string]any)
	defs, _ := root["definitions"].(map[string]any)
	if len(defs) == 0 {
		return nil, fmt.Errorf("A2A schema %s: no definitions", path)
	}
	c := jsonschema.NewCompiler()
	for title, def := range defs {
		name := strings.ReplaceAll(title, " ", "")
		pkg := "lf.a2a.v1."
		if name == "Struct" {
			pkg = "google.protobuf."
		}
		if err := c.AddResource(base+pkg+name+".jsonschema.json", def); err != nil {
			return nil, fmt.Errorf("A2A schema %s: %w", path, err)
		}
	}
	s, err := c.Compile(base + "lf.a2a.v1.AgentCard.jsonschema.json")
	if err != nil {
		return nil, fmt.Errorf("A2A schema %s: %w", path, err)
	}
	return s, nil
}

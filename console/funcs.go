package console

import (
	"html/template"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/registry"
)

// funcs are the helpers the templates use.
var funcs = template.FuncMap{
	"state":      stateName,
	"stateClass": stateClass,
	"text":       messageText,
	"when":       when,
	"since":      since,
	"join":       strings.Join,
	"short":      short,
	"evtext":     eventText,
	"contained":  containmentText,
}

// stateName is a task state as people read it: "working", "input
// required".
func stateName(s a2a.TaskState) string {
	if s == "" {
		return "unknown"
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", " ")
}

// stateClass is a task state as a CSS class suffix: "input-required".
func stateClass(s a2a.TaskState) string {
	return strings.ReplaceAll(stateName(s), " ", "-")
}

// messageText is the text parts of m, joined by spaces.
func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}

// partsText is the text among parts, joined by spaces.
func partsText(parts a2a.ContentParts) string {
	var texts []string
	for _, p := range parts {
		if t, ok := p.Content.(a2a.Text); ok {
			texts = append(texts, string(t))
		}
	}
	return strings.Join(texts, " ")
}

// eventText says what an event carries, in a line.
func eventText(ev delegation.Event) string {
	switch {
	case ev.Error != "":
		return ev.Error
	case ev.Artifact != nil:
		return partsText(ev.Artifact.Parts)
	case ev.Containment != nil:
		return containmentText(ev.Containment)
	}
	return messageText(ev.Message)
}

// containmentText says which agent was contained, by whom, when, why and
// what happens to its running work.
func containmentText(c *registry.Containment) string {
	return "agent " + c.Agent + " " + c.String()
}

// when formats a time as RFC 3339 with milliseconds, UTC; "" for zero.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// since is the time from a to b, rounded to the millisecond.
func since(a, b time.Time) string {
	if a.IsZero() || b.IsZero() {
		return ""
	}
	return b.Sub(a).Round(time.Millisecond).String()
}

// short cuts a digest or id to its first 12 characters.
func short(s string) string {
	if len(s) <= 12 {
		return s
	}
	return s[:12] + "…"
}

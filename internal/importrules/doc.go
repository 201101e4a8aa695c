// Package importrules holds the test that keeps orchd's imports pointing
// one way (README.md, "Layout"): a front never imports another front,
// library packages import no front, and only the programs (cmd/,
// examples/) and the test helpers import orchestrator, which wires the
// fronts together.
package importrules

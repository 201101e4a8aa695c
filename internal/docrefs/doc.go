// Package docrefs keeps the documentation's references to the code true.
// Its test reads every Markdown file of the repository for references
// written as `dir/file.go`, `dir/file.go:Name` or `dir/file.go:Type.Method`
// (and `dir/file.go:123`), and fails when a file has moved or a name is no
// longer declared there, so docs/internals.md cannot drift from the code
// it walks. A path whose directory is not in this repository (an a2a-go or
// nats-server file, say) is not checked.
package docrefs

// Package b has no tests.
package b

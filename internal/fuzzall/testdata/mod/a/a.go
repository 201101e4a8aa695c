// Package a holds fuzz targets, and functions that only look like them,
// for fuzzall's tests.
package a

import "testing"

// Two reports whether b is two bytes long.
func Two(b []byte) bool { return len(b) == 2 }

// FuzzNotInATest is not a target: it is not in a test file.
func FuzzNotInATest(f *testing.F) {}

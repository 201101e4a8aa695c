package main

import (
	"fmt"
	"math"
	"regexp"
	"strings"
)

// missing stands in the rendered report for a figure whose benchmark did
// not run; no section holding it is written.
const missing = "\x00missing\x00"

// incomplete reports whether rendered text shows a figure that could not
// be computed: one marked missing, or a bare NaN.
func incomplete(text string) bool {
	return strings.Contains(text, missing) || strings.Contains(text, "NaN")
}

// partial is the results of a run restricted by -only, for the template:
// a figure of a benchmark that did not run renders as missing instead of
// failing the report, so splice can tell the sections that were measured
// from the others.
type partial struct{ results }

// Med is results.Med, NaN for a benchmark that did not run.
func (p partial) Med(name, unit string) float64 {
	v, err := p.results.Med(name, unit)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Ratio is results.Ratio, NaN when either benchmark did not run.
func (p partial) Ratio(a, b, unit string) float64 {
	v, err := p.results.Ratio(a, b, unit)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Range is results.Range, missing for a benchmark that did not run.
func (p partial) Range(name, unit string) string {
	v, err := p.results.Range(name, unit)
	if err != nil {
		return missing
	}
	return v
}

// RatioRange is results.RatioRange, missing when either benchmark did
// not run.
func (p partial) RatioRange(a, b, unit string) string {
	v, err := p.results.RatioRange(a, b, unit)
	if err != nil {
		return missing
	}
	return v
}

// sections splits a report into the text before its first "## " heading
// and its sections, each from its heading to the next.
func sections(text string) (preamble string, secs []string) {
	lines := strings.SplitAfter(text, "\n")
	var cur strings.Builder
	first := true
	for _, l := range lines {
		if strings.HasPrefix(l, "## ") {
			if first {
				preamble = cur.String()
				first = false
			} else {
				secs = append(secs, cur.String())
			}
			cur.Reset()
		}
		cur.WriteString(l)
	}
	if first {
		return cur.String(), nil
	}
	return preamble, append(secs, cur.String())
}

// heading is a section's first line.
func heading(sec string) string {
	h, _, _ := strings.Cut(sec, "\n")
	return h
}

// splice writes the report rendered from a partial run over the old one:
// the new preamble, then each section of the new report in its order,
// as rendered when all its figures were measured, else as the old report
// has it. A section measured by no run of the partial one and missing
// from the old report is an error.
func splice(old, rendered string) (string, error) {
	_, oldSecs := sections(old)
	kept := map[string]string{}
	for _, s := range oldSecs {
		kept[heading(s)] = s
	}
	pre, secs := sections(rendered)
	if incomplete(pre) {
		return "", fmt.Errorf("the report's preamble needs figures of benchmarks that did not run")
	}
	var b strings.Builder
	b.WriteString(pre)
	for i, s := range secs {
		if incomplete(s) {
			k, ok := kept[heading(s)]
			if !ok {
				return "", fmt.Errorf("section %q: its benchmarks did not run and the report at -o has no such section", strings.TrimPrefix(heading(s), "## "))
			}
			s = k
		}
		if i == len(secs)-1 {
			s = strings.TrimRight(s, "\n") + "\n"
		} else if !strings.HasSuffix(s, "\n\n") {
			s = strings.TrimRight(s, "\n") + "\n\n"
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// keptRE and measuredRE find when a report's figures were last all
// measured: the date an -only report kept its other sections from, or
// the date a full report was measured on.
var (
	keptRE     = regexp.MustCompile(`kept from the full run of\s+(\d{4}-\d{2}-\d{2})`)
	measuredRE = regexp.MustCompile("Measured on (\\d{4}-\\d{2}-\\d{2}) by `go run \\./internal/benchreport`\\s")
)

// fullRunDate returns the date of the last full run behind a report, or
// "" when the report does not say.
func fullRunDate(report string) string {
	pre, _ := sections(report)
	for _, re := range []*regexp.Regexp{keptRE, measuredRE} {
		if m := re.FindStringSubmatch(pre); m != nil {
			return m[1]
		}
	}
	return ""
}

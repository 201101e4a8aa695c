package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// versionInfo is what `orchd version` reports: which source the binary
// was built from and with which Go, as the build recorded it.
type versionInfo struct {
	// Version is the module version: a release tag for a binary built by
	// go install …@vX.Y.Z, "(devel)" for one built from a checkout.
	Version string `json:"version"`
	// Revision, Time and Modified come from the version control system
	// of a checkout: the commit, its time, and whether the tree held
	// uncommitted changes. Empty when the build recorded none.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified"`
	// Go is the Go version, Platform the GOOS/GOARCH, of the binary.
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// versionOf reads a versionInfo from the build information; ok is false
// when the binary holds none.
func versionOf(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print orchd's version, the commit it was built from and its Go version",
		Long: `Print the module version of this binary (a release tag when installed with
go install github.com/orchd/orchd/cmd/orchd@vX.Y.Z, "(devel)" when built from
a checkout), the commit, its time and whether the tree had uncommitted
changes (when built from a checkout), and the Go version and platform.`,
		Example: `  orchd version
  orchd version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionOf(debug.ReadBuildInfo())
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "orchd\t%s\n", v.Version)
			if v.Revision != "" {
				rev := v.Revision
				if v.Modified {
					rev += " (modified)"
				}
				fmt.Fprintf(tw, "revision\t%s\n", rev)
			}
			if v.Time != "" {
				fmt.Fprintf(tw, "time\t%s\n", v.Time)
			}
			fmt.Fprintf(tw, "go\t%s %s\n", v.Go, v.Platform)
			return tw.Flush()
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

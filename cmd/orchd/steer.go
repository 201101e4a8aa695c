package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/steering"
)

// newSteerCmd returns `orchd steer` or `orchd interrupt`.
func newSteerCmd(c steering.Control) *cobra.Command {
	var server, reference string
	var output outputFormat
	use, short, long := `steer ID "text"`, "Steer a delegation's work in flight, across every hop",
		`Send a steer to the delegation's downstream task: the agent incorporates it
and keeps working. Every hop must advertise the steerable mode of the
steering extension; otherwise the hop that cannot pass it on refuses, naming
itself, and nothing is delivered. Prints the receipt: every hop that
accepted the steer and its sequence number there. Exits 3 when the steer
is refused (the delegation is not WORKING, or a hop cannot take it).`
	example := `  orchd steer 4f1c… "narrow it to 2025"
  orchd steer --reference out-1 4f1c… "drop that source"`
	args := cobra.ExactArgs(2)
	if c == steering.Interrupt {
		use, short, long = `interrupt ID ["text"]`, "Interrupt a delegation's work, across every hop",
			`Interrupt the delegation's downstream task: the agent stops and waits for
input, and so does every hop above it. Answer with orchd tasks send to
resume the same tasks. Every hop must advertise the interruptible mode.
Exits 3 when the interrupt is refused (the delegation is not WORKING, or a
hop cannot take it).`
		example = `  orchd interrupt 4f1c…
  orchd interrupt 4f1c… "stop: the premise changed"`
		args = cobra.RangeArgs(1, 2)
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: example,
		Args:    args,
		RunE: func(cmd *cobra.Command, args []string) error {
			body := httpapi.SteerRequest{ReferenceMessageID: reference}
			if len(args) > 1 {
				body.Text = args[1]
			}
			api := newAPIClient(server)
			var r steering.Receipt
			err := api.do(cmd.Context(), "POST", "/v1/delegations/"+url.PathEscape(args[0])+":"+string(c), body, &r)
			var ae *apiError
			if errors.As(err, &ae) && ae.status == http.StatusConflict {
				// Nothing was delivered anywhere.
				return &exitError{code: exitRefused, err: err}
			}
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), r)
			}
			dup := ""
			if r.Duplicate {
				dup = " (already delivered; not sent again)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d accepted by %s%s\n", r.Control, r.Seq, receiptHops(r), dup)
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&reference, "reference", "", "id of the output message this reacts to")
	outputFlag(cmd, &output)
	return cmd
}

// receiptHops writes the hops that accepted a signal, first to last:
// "orchd-… #1 → steerable #1".
func receiptHops(r steering.Receipt) string {
	hops := make([]string, len(r.Hops))
	for i, h := range r.Hops {
		hops[i] = fmt.Sprintf("%s #%d", h.Agent, h.Seq)
	}
	return strings.Join(hops, " → ")
}

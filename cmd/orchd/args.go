package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// usageError is a mistake in the command line: it exits with exitUsage.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// seeHelp ends a usage message by pointing at the command's help.
func seeHelp(cmd *cobra.Command) string {
	return fmt.Sprintf("see '%s --help'", cmd.CommandPath())
}

// sentences makes every command under root speak to a person when its
// command line is wrong, and exit with exitUsage: a wrong number of
// arguments is described from the command's Use line, an unknown or
// malformed flag by name, and a command group run alone or with an
// unknown command lists its commands.
func sentences(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(unknownHelp(root.HelpFunc()))
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && c.Run == nil && c.RunE == nil:
			c.Args = cobra.ArbitraryArgs
			c.RunE = groupRun
			c.SuggestionsMinimumDistance = 2
		case c.Args != nil:
			check := c.Args
			c.Args = func(cmd *cobra.Command, args []string) error {
				if check(cmd, args) == nil {
					return nil
				}
				return usageError("%s; %s", argsMessage(cmd, len(args)), seeHelp(cmd))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// helpCmd replaces cobra's help command, which prints "Unknown help
// topic" for a command that does not exist and exits 0: here that is a
// usage error, said as groupRun says it.
func helpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:     "help [command]",
		Short:   "Help about any command",
		Example: "  orchd help delegate\n  orchd help agents add",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				parent := root
				if target != nil {
					parent = target
				}
				name := strings.Join(args, " ")
				if len(rest) > 0 {
					name = rest[0]
				}
				return noCommand(parent, name)
			}
			target.SetOut(cmd.OutOrStdout())
			return target.Help()
		},
	}
}

// helpErrKey carries, in the context a command line runs with, where
// unknownHelp puts its usage error: cobra answers --help with the help of
// the command it found and no error, whatever came after it.
type helpErrKey struct{}

// unknownHelp wraps a help function: asked for the help of an unknown
// command of a group (orchd mcp --help, orchd agents bogus -h), it says
// there is no such command, as groupRun does, and makes that the command
// line's error, a usage error, instead of printing the group's help and
// exiting 0.
func unknownHelp(help func(*cobra.Command, []string)) func(*cobra.Command, []string) {
	return func(cmd *cobra.Command, args []string) {
		names := cmd.Flags().Args()
		var holder *error
		if ctx := cmd.Context(); ctx != nil {
			holder, _ = ctx.Value(helpErrKey{}).(*error)
		}
		if cmd.RunE == nil || !cmd.HasSubCommands() || len(names) == 0 || holder == nil {
			help(cmd, args)
			return
		}
		*holder = noCommand(cmd, names[0])
	}
}

// groupRun runs a command that only groups others: alone, it prints its
// help on stderr; with an unknown command, it says so, with the closest
// names. Either way it is a usage error.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return usageError("%s needs a command: %s", cmd.CommandPath(), strings.Join(commandNames(cmd), ", "))
	}
	return noCommand(cmd, args[0])
}

// noCommand is the usage error for a command cmd does not have, with the
// closest name it has.
func noCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("%s has no command %q", cmd.CommandPath(), name)
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageError("%s; %s", msg, seeHelp(cmd))
}

// commandNames lists the commands a person may run under cmd.
func commandNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return names
}

// flagError rewrites pflag's errors as sentences naming the command.
func flagError(cmd *cobra.Command, err error) error {
	var (
		notExist *pflag.NotExistError
		required *pflag.ValueRequiredError
		invalid  *pflag.InvalidValueError
		syntax   *pflag.InvalidSyntaxError
		msg      string
	)
	switch {
	case errors.As(err, &notExist):
		name := "--" + notExist.GetSpecifiedName()
		if notExist.GetSpecifiedShortnames() != "" {
			name = "-" + notExist.GetSpecifiedName()
		}
		msg = fmt.Sprintf("%s has no flag %s", cmd.CommandPath(), name)
	case errors.As(err, &required):
		msg = fmt.Sprintf("%s needs a value", flagName(required.GetFlag()))
	case errors.As(err, &invalid):
		msg = fmt.Sprintf("%s %q: want %s", flagName(invalid.GetFlag()), invalid.GetValue(), wantOf(invalid.GetFlag(), errors.Unwrap(err)))
	case errors.As(err, &syntax):
		msg = fmt.Sprintf("%q is not a flag; flags are written -x or --name", syntax.GetSpecifiedFlag())
	default:
		msg = err.Error()
	}
	return usageError("%s; %s", msg, seeHelp(cmd))
}

// flagName is how the flag is written on the command line.
func flagName(f *pflag.Flag) string {
	if f == nil {
		return "a flag"
	}
	return "--" + f.Name
}

// wantOf says what a flag of f's type takes; for a flag type of orchd's
// own, its parse error says it.
func wantOf(f *pflag.Flag, cause error) string {
	if f != nil {
		switch f.Value.Type() {
		case "int", "int64", "int32", "uint", "uint64":
			return "a whole number"
		case "float64":
			return "a number"
		case "bool":
			return "true or false"
		case "duration":
			return "a duration such as 30s or 5m"
		}
	}
	if cause != nil {
		return cause.Error()
	}
	return "another value"
}

// outputFormat is the value of -o: text or json. It is checked when the
// flag is parsed, so a wrong value is a usage error like any other.
type outputFormat string

// String returns the format.
func (o *outputFormat) String() string { return string(*o) }

// Type names the flag's type in help.
func (o *outputFormat) Type() string { return "text|json" }

// Set accepts text or json.
func (o *outputFormat) Set(s string) error {
	if s != "text" && s != "json" {
		return errors.New("text or json")
	}
	*o = outputFormat(s)
	return nil
}

// outputFlag adds -o/--output, text by default, to cmd.
func outputFlag(cmd *cobra.Command, o *outputFormat) {
	*o = "text"
	cmd.Flags().VarP(o, "output", "o", "output format: text or json")
}

// positional is what a command's Use line says of its arguments.
type positional struct {
	required []string // in order
	optional []string // after the required ones
	variadic bool     // the last one repeats
}

// usePositional reads the arguments from a Use line such as
// `steer ID "text"`, `interrupt ID ["text"]`, `check FILE|DIR...` or
// `list [--state S] [--limit N]`: flags (and the word after a bare flag)
// are skipped, quoted names are written in capitals.
func usePositional(use string) positional {
	var p positional
	fields := splitUse(use)
	for i := 1; i < len(fields); i++ {
		f := fields[i]
		if strings.HasPrefix(f, "-") {
			if i+1 < len(fields) && !strings.HasPrefix(fields[i+1], "-") && !strings.HasPrefix(fields[i+1], "[") {
				i++ // the flag's value
			}
			continue
		}
		optional := strings.HasPrefix(f, "[")
		f = strings.TrimPrefix(f, "[")
		if strings.HasPrefix(f, "-") {
			continue // an optional flag
		}
		variadic := strings.HasSuffix(f, "...")
		f = strings.TrimSuffix(strings.TrimSuffix(f, "..."), "]")
		name := strings.ToUpper(strings.Trim(f, `"'`))
		if variadic {
			p.variadic = true
			name += "..."
		}
		if optional {
			p.optional = append(p.optional, name)
		} else {
			p.required = append(p.required, name)
		}
	}
	return p
}

// splitUse splits a Use line on spaces outside brackets.
func splitUse(use string) []string {
	var fields []string
	var cur strings.Builder
	depth := 0
	for _, r := range use {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case r == ' ' && depth == 0:
			if cur.Len() > 0 {
				fields = append(fields, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		fields = append(fields, cur.String())
	}
	return fields
}

// argsMessage says, for a person, how many arguments cmd takes and what
// they are, given that got did not fit.
func argsMessage(cmd *cobra.Command, got int) string {
	p := usePositional(cmd.Use)
	path := cmd.CommandPath()
	nreq, nopt := len(p.required), len(p.optional)
	switch {
	case nreq == 0 && nopt == 0 && !p.variadic:
		return fmt.Sprintf("%s takes no arguments, but was given %d", path, got)
	case p.variadic:
		return fmt.Sprintf("%s needs at least %s, %s", path, count(nreq, "argument", "arguments"), strings.Join(append(p.required, p.optional...), " "))
	case nopt > 0:
		return fmt.Sprintf("%s needs %d or %d arguments, %s and optionally %s", path, nreq, nreq+nopt, andList(p.required), andList(p.optional))
	case got > nreq:
		return fmt.Sprintf("%s takes %s, %s, but was given %d", path, count(nreq, "argument", "arguments"), andList(p.required), got)
	}
	return fmt.Sprintf("%s needs %s, %s", path, count(nreq, "argument", "arguments"), andList(p.required))
}

// andList is "A", "A and B" or "A, B and C".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

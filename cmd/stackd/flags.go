package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
)

// newFlagSet returns a flag set for a subcommand whose errors go to the
// caller instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, then fills every flag not given on the command
// line from its environment variable STACKD_<FLAG> (dashes become
// underscores). A parse error is a usage error; -h prints usage, a line
// such as "validate PATH...", and the flags.
func parseFlags(fs *flag.FlagSet, usage string, args []string, out io.Writer) error {
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printFlags(fs, usage, out)
			return err
		}
		return usageErrorf("%s: %v%s", fs.Name(), err, didYouMean(fs, err))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok && !given[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = usageErrorf("%s: invalid value of %s: %v", fs.Name(), env, e)
			}
		}
	})
	return err
}

// didYouMean suggests the flag of fs nearest to an unknown one that err
// (the flag package's) names: " (did you mean --config?)", or "".
func didYouMean(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := spec.Closest(strings.TrimLeft(name, "-"), names); s != "" {
		return " (did you mean --" + s + "?)"
	}
	return ""
}

func envName(flagName string) string {
	return "STACKD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func printFlags(fs *flag.FlagSet, usage string, out io.Writer) {
	fmt.Fprintf(out, "Usage: stackd %s\n\nFlags:\n", usage)
	fs.SetOutput(out)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseInterspersed parses flags wherever they stand among the arguments
// ("status app --json"), as users expect; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

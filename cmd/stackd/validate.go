package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/stackd/stackd/daemon/spec"
)

// validate checks config files and directories like a compiler: one line
// per problem or note, exit code 1 when there is a problem.
func validate(args []string, stdout io.Writer) error {
	fs := newFlagSet("validate")
	quiet := fs.Bool("quiet", false, "print errors only, not notes about ignored Kubernetes kinds and fields")
	if err := parseFlags(fs, "validate [--quiet] PATH...", args, stdout); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("validate: name at least one config file or directory")
	}
	cfg, diags, err := spec.Load(fs.Args()...)
	for _, d := range diags {
		if !d.Note || !*quiet {
			fmt.Fprintln(stdout, d)
		}
	}
	var cerr *spec.ConfigError
	if errors.As(err, &cerr) {
		fmt.Fprintf(stdout, "%d error(s)\n", len(cerr.Diags))
		return errProblemsFound
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: %d stack(s), %d program(s)\n", len(cfg.Stacks), len(cfg.Programs))
	return nil
}

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
	var maxConfig byteSize
	defineMaxConfig(fs, &maxConfig)
	if err := parseFlags(fs, "validate [--quiet] [--max-config-bytes SIZE] PATH...", args, stdout); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("validate: name at least one config file or directory")
	}
	var srcs []spec.Source
	for _, p := range fs.Args() {
		srcs = append(srcs, spec.Source{Path: p, MaxBytes: maxConfig.limit()})
	}
	cfg, diags, err := spec.LoadInputs(localInputs(srcs))
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

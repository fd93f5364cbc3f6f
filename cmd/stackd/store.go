package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/stackd/stackd/store"
)

const defaultDataDir = ".data"

// storeCommand runs "stackd store SUBCOMMAND".
func storeCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return usageErrorf("store: the only subcommand is check")
	}
	fs := newFlagSet("store check")
	dataDir := fs.String("data-dir", defaultDataDir, "data directory holding "+store.FileName)
	if err := parseFlags(fs, "store check [--data-dir DIR]", args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("store check: unexpected argument %q", fs.Arg(0))
	}
	s, err := openReadOnly(*dataDir)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		return fmt.Errorf("%s is damaged: %w", s.Path(), err)
	}
	version, err := s.SchemaVersion()
	if err != nil {
		return err
	}
	stacks, err := s.Stacks()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: %s: schema version %d, %d stack(s)\n", s.Path(), version, len(stacks))
	return nil
}

// backup writes a consistent copy of the state file.
func backup(args []string, stdout io.Writer) error {
	fs := newFlagSet("backup")
	dataDir := fs.String("data-dir", defaultDataDir, "data directory holding "+store.FileName)
	if err := parseFlags(fs, "backup [--data-dir DIR] FILE", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("backup: name the file to write")
	}
	s, err := openReadOnly(*dataDir)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w\nwhile stackd runs, back up through its API instead", err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	if err := store.BackupFile(s, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", fs.Arg(0))
	return nil
}

func openReadOnly(dataDir string) (*store.Store, error) {
	return store.Open(filepath.Join(dataDir, store.FileName), store.Options{ReadOnly: true, Timeout: 2 * time.Second})
}

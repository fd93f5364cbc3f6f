package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/stackd/stackd/store"
)

const defaultDataDir = ".data"

// storeCommand runs "stackd store SUBCOMMAND".
func storeCommand(args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "migrate" {
		return migrateCommand(args[1:], stdout)
	}
	if len(args) == 0 || args[0] != "check" {
		return usageErrorf("store: the subcommands are check and migrate")
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

// migrateCommand runs "stackd store migrate --to-etcd URLS": it copies a
// stopped single node's state into an empty cluster.
func migrateCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("store migrate")
	dataDir := fs.String("data-dir", defaultDataDir, "data directory holding "+store.FileName)
	var cf clusterFlags
	cf.defineEtcd(fs, "to-etcd", "etcd client `URLs` of the cluster, comma-separated")
	if err := parseFlags(fs, "store migrate --to-etcd URLS [--data-dir DIR] [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("store migrate: unexpected argument %q", fs.Arg(0))
	}
	if cf.etcd == "" {
		return usageErrorf("store migrate: --to-etcd is required")
	}
	s, err := openReadOnly(*dataDir)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w\nstop stackd before migrating its state", err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	cf.node = "migrate"
	ctx := context.Background()
	c, err := cf.connect(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := c.Import(ctx, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported %d stack(s), %d update(s), %d log(s), %d config revision(s), %d metadata value(s) into %s\n",
		n.Stacks, n.Updates, n.Logs, n.Revisions, n.Meta, cf.etcd)
	return nil
}

package main

import (
	"context"
	"errors"
	"io"
)

// runDaemon runs the daemon until ctx ends.
func runDaemon(ctx context.Context, args []string, stderr io.Writer) error {
	return errors.New("run: the reconcile loop is not built yet; use validate, store check and backup")
}

package runner

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// exportedState is the part of `pulumi stack export` the runner reads:
// what each resource is and where it sits, never its inputs or outputs,
// which may hold secrets.
type exportedState struct {
	Deployment struct {
		Resources []struct {
			URN            string     `json:"urn"`
			Custom         bool       `json:"custom"`
			Delete         bool       `json:"delete"`
			ID             string     `json:"id"`
			Type           string     `json:"type"`
			Parent         string     `json:"parent"`
			Protect        bool       `json:"protect"`
			External       bool       `json:"external"`
			Provider       string     `json:"provider"`
			RetainOnDelete bool       `json:"retainOnDelete"`
			Created        *time.Time `json:"created"`
			Modified       *time.Time `json:"modified"`
		} `json:"resources"`
	} `json:"deployment"`
}

// exportResources reads w's resources from its state: on a file backend
// straight from the checkpoint the engine wrote (see readCheckpoint), on
// any other in the stack's own process and sandbox, as `pulumi stack
// export` prints them. Secret values stay encrypted, and are not read
// anyway.
func (r *Runner) exportResources(ctx context.Context, w *workspace) ([]model.Resource, error) {
	if data, ok, err := w.readCheckpoint(); ok || err != nil {
		if err != nil {
			return nil, fmt.Errorf("stack %s: read the state: %w", w.Name, err)
		}
		r.noteStateSize(w, data, true) // as readCheckpoint writes it
		return parseExport(data)
	}
	out, err := r.pulumi(ctx, w, call{what: "export the state"}, "stack", "export", "--stack", w.Stack)
	if err != nil {
		return nil, err
	}
	r.noteStateSize(w, []byte(out), false)
	return parseExport([]byte(out))
}

// readCheckpoint reads w's checkpoint on a file backend, as `pulumi stack
// export` would print it ({"deployment": …}): a process less after each
// operation. Only the engine writes the backend's directory (a program's
// processes may not), the checkpoint is a regular file opened without
// following links, and it is read once the engine has ended. ok is false
// on another backend, or when there is no checkpoint (the stack does not
// exist yet, or the CLI keeps it where this does not look): the caller
// then asks the CLI.
func (w *workspace) readCheckpoint() (data []byte, ok bool, err error) {
	root, isFile := fileBackendDir(w.state)
	if !isFile {
		return nil, false, nil
	}
	org, project := w.orgProject("organization")
	base := stackBase(w.Stack)
	for _, rel := range []string{filepath.Join(project, base), filepath.Join(org, project, base)} {
		for _, ext := range []string{".json", ".json.gz"} {
			raw, err := readRegular(filepath.Join(root, ".pulumi", "stacks", rel+ext))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			if ext == ".json.gz" {
				if raw, err = gunzip(raw); err != nil {
					return nil, false, err
				}
			}
			var cp struct {
				Checkpoint struct {
					Latest json.RawMessage `json:"latest"`
				} `json:"checkpoint"`
			}
			if err := json.Unmarshal(raw, &cp); err != nil {
				return nil, false, fmt.Errorf("checkpoint %s: %w", rel+ext, err)
			}
			if len(cp.Checkpoint.Latest) == 0 || string(cp.Checkpoint.Latest) == "null" {
				return []byte(`{"deployment":{}}`), true, nil
			}
			out, err := json.Marshal(map[string]json.RawMessage{"deployment": cp.Checkpoint.Latest})
			return out, err == nil, err
		}
	}
	return nil, false, nil
}

// gunzip inflates a gzipped checkpoint.
func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(io.LimitReader(zr, 1<<30))
}

// parseExport turns an exported deployment into the daemon's resources,
// in the state's order (parents before children); resources pending
// deletion are left out.
func parseExport(data []byte) ([]model.Resource, error) {
	var st exportedState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("read the exported state: %w", err)
	}
	out := make([]model.Resource, 0, len(st.Deployment.Resources))
	for _, x := range st.Deployment.Resources {
		if x.Delete {
			continue
		}
		out = append(out, model.Resource{
			URN: x.URN, Type: x.Type, Name: urnName(x.URN), ID: x.ID, Parent: x.Parent,
			Provider: providerURN(x.Provider), Custom: x.Custom, Protect: x.Protect,
			RetainOnDelete: x.RetainOnDelete, External: x.External,
			Created: timeOf(x.Created), Modified: timeOf(x.Modified),
		})
	}
	return out, nil
}

// urnName is the name part of a URN (after its last "::").
func urnName(urn string) string {
	return urn[strings.LastIndex(urn, "::")+2:]
}

// providerURN is the URN of a provider reference "URN::ID".
func providerURN(ref string) string {
	if i := strings.LastIndex(ref, "::"); i > 0 {
		return ref[:i]
	}
	return ref
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

package runner

import (
	"context"
	"encoding/json"
	"fmt"
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

// exportResources reads w's resources from its state, in the stack's own
// process and sandbox, as `pulumi stack export` prints them (secret
// values stay encrypted, and are not read anyway).
func (r *Runner) exportResources(ctx context.Context, w *workspace) ([]model.Resource, error) {
	out, err := r.pulumi(ctx, w, call{what: "export the state"}, "stack", "export", "--stack", w.Stack)
	if err != nil {
		return nil, err
	}
	return parseExport([]byte(out))
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

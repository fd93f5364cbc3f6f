package resolve

import (
	"maps"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Options sets op's options from s and its updateTemplate: a destroy
// takes none of refresh and targets; an up that repairs drift
// (remediate) refreshes first.
func Options(op *model.Operation, s *spec.StackSpec, remediate bool) {
	if s.OperationTimeout.Duration > 0 {
		op.Timeout = s.OperationTimeout.Duration
	}
	op.Refresh, op.Targets, op.TargetDependents = s.Refresh, s.Targets, s.TargetDependents
	if t := s.UpdateTemplate; t != nil && t.Spec != nil {
		ts := t.Spec
		op.Refresh = op.Refresh || ts.Refresh
		op.Targets = append(append([]string(nil), op.Targets...), ts.Target...)
		op.TargetDependents = op.TargetDependents || ts.TargetDependents
		op.Parallel, op.Message, op.ExpectNoChanges = int(ts.Parallel), ts.Message, ts.ExpectNoChanges
		op.Replace, op.ContinueOnError, op.Remove = ts.Replace, ts.ContinueOnError, ts.Remove
	}
	switch op.Type {
	case model.UpdateDestroy:
		op.Refresh, op.Targets, op.TargetDependents = false, nil, false
	case model.UpdateUp:
		op.Refresh = op.Refresh || remediate
	}
}

// Identity is the cloud credentials request of an operation at commit of
// a stack with those labels, repository and spec.credentials, applying
// the plan approved in g (nil: none): nil when the stack asks for none.
func Identity(c *spec.Credentials, labels map[string]string, repo, commit string, g *model.Gate) *model.IdentityRequest {
	if !c.Any() {
		return nil
	}
	req := &model.IdentityRequest{Labels: maps.Clone(labels), Repository: repo, Commit: commit, Credentials: *c}
	if g != nil {
		req.ApprovedBy = g.By
	}
	return req
}

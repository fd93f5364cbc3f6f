// Package gate is change control's pure part: which operations go
// through it (ChangeControlled), which approval and labels apply to a
// stack, whether a plan must wait for a person (NeedsApproval), the
// policies' verdict on a preview, failing closed (Policies, JudgeSteps),
// and what a stack held by a gate does next (Action). The reconcile loop
// (daemon) runs the previews, holds and applies the plans; the gate's
// record is model.Gate. It imports nothing of the loop.
package gate

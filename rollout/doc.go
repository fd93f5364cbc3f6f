// Package rollout orders the updates of the stacks a StackSet generates,
// by its RollingSync strategy: steps of stacks chosen by label, each
// step moving to a new revision only once every stack of the earlier
// steps succeeded on its own target, at most maxUpdate stacks of a step
// at once.
//
// The daemon asks a Controller, through an interface it declares,
// whether a stack may start an update (Admit), and tells it when that
// update ended (Done). Plan computes where a rollout stands from the
// stacks alone, for the API and for Admit alike. The package imports
// only the spec and the model: the slots of maxUpdate (Slots) and the
// records of aborted rollouts (Meta) are interfaces, which LocalSlots and
// an in-memory store implement for a single replica, and the cluster
// package and the daemon's store for several.
//
// Rules, each against a known failure of Argo CD's progressive syncs:
//   - a later step waits until every stack of the earlier steps is done
//     on its own target (succeeded on its target commit and generation):
//     neither health nor a success on an earlier revision counts, and a
//     stack whose target is not known yet is not done;
//   - a stack that failed on its target halts the rollout: every stack
//     not done is held, the failed one included (no automatic retry),
//     until a newer commit or a sync request to the failed stack (resume);
//   - an abort records each stack's target; a stack stays held while its
//     target is the one recorded;
//   - a stack admitted holds a slot of its step until Done, and a slot
//     that cannot be taken or checked holds the stack: an error never
//     admits.
package rollout

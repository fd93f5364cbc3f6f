// Package cluster lets several stackd replicas share the stacks of one
// config through etcd. It is the only package of stackd that imports the
// etcd client.
//
// Each replica holds one etcd session (a lease kept alive) and registers
// itself under the prefix. Every stack is meant for one live member,
// picked by rendezvous hashing over the member names (Owner); a replica
// holds a stack while it holds the stack's ownership key, a key bound to
// its lease and created in a transaction only when absent. A replica
// asked to hand a stack over releases the key between operations; a
// replica whose session ends loses every key with its lease.
//
// Cluster also implements the daemon's Store on etcd. Every write about a
// stack (its record, updates and logs) is a transaction conditional on
// the ownership key still being the one this replica created (fencing):
// a replica that was paused or cut off and comes back cannot overwrite
// what the new holder wrote. The audit trail (audit.Log) is not
// about a stack's state: every replica appends what it served, unfenced,
// and reads every replica's entries.
//
// Layout under the prefix (default /stackd/<cluster-name>/):
//
//	members/<node>             JSON member, bound to the node's lease
//	owners/<stack>             the holder's node name, bound to its lease
//	leader/                    the election of the member that records revisions
//	stacks/<stack>             JSON model.StackRecord
//	seq/<stack>                the stack's last update sequence number
//	updates/<stack>/<seq>      JSON model.Update (seq as 20 digits)
//	logs/<stack>/<seq>         the update's log, gzip
//	revseq, revisions/<seq>    config revisions
//	auditseq, audit/<seq>      the audit trail of every replica, JSON model.AuditEntry
//	auditlow                   the Seq below which the trail was pruned
//	meta/<key>                 small values (config commits in force)
//	requests/<stack>           the last sync request sent to the holder
//	claims/<identity>          the stack that claimed a Pulumi stack (PulumiClaims)
//	push                       the last push event, for every replica
//	oidc-keys/<kid>            a replica's public OpenID signing key (JWK), bound to
//	                           a lease of its own that ends with its last token (keys.go)
//	rollout-slots/<key>/<node> a stack's slot of a rollout step (maxUpdate), bound to
//	                           the holder's lease; rollout-slotver/<key> orders takers (slots.go)
package cluster

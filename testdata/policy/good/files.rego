# Files managed by stackd are not deleted by a commit; replacing one is
# allowed, with a warning.
package stackd.files

deny contains msg if {
	some step in input.steps
	step.op == "delete"
	step.type == "stackdtest:index:File"
	msg := sprintf("deleting %s is not allowed (stack %s)", [step.old.path, input.stack])
}

warn contains msg if {
	some step in input.steps
	step.op == "replace"
	msg := sprintf("%s is replaced", [step.urn])
}

package steps

// KeyPrefix begins every key the step runner derives (Key). A caller's key may not
// begin with it (outbox's Prepare refuses it), so no call can forge a step's op.
const KeyPrefix = "~step/"

// Key is the idempotency key of the op of step name of the composite op
// parentOpID: "~step/<parent op id>/<name>". It is derived from the parent op's id, so
// a retry of the parent's call in any form (its op is the same) finds the same steps,
// and a new op under a purged parent's key does not.
func Key(parentOpID, name string) string { return KeyPrefix + parentOpID + "/" + name }

// CompensationKey is the key of the op that compensates step name of parentOpID:
// "~step/<parent op id>/undo.<name>" ('.' is not a step name's).
func CompensationKey(parentOpID, name string) string { return Key(parentOpID, "undo."+name) }

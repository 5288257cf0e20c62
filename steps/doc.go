// Package steps is the step runner of composite ops (docs/steps.md). A composite tool
// (vendorapi.StepsVendor) declares steps, each an op of another tool; the runner
// enqueues them in order, each once its predecessor succeeded or was skipped, under a
// key derived from the parent op's id (Key), and when a required step fails for good it
// enqueues the compensations of the steps done before it, last first
// (CompensationKey). Each move is planned by a pure function (planSteps) and written in
// one transaction with the run's state change (internal/opstate's ApplyStep); the
// parent op is settled once the run is over.
//
// The Outbox owns every job that moves an op, the step runner's included: outbox.New
// builds a Runner with New, handing it a Deps struct with what it uses of the Outbox
// (the pool, the op state machine, the enqueue of a step's op, the logger). The
// Outbox's enqueue starts a composite op's run in its own transaction (StartTx); the
// runner's job (Args, kind "oncebox.steps") runs on Queue, and snoozes while a step's
// op is on its way. outbox.Outbox.StepsOf reads a composite op's steps (Refs). The
// package never imports outbox.
package steps

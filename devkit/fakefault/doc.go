// Package fakefault holds what the fake vendor servers (devkit/fakestripe,
// devkit/fakesendgrid, devkit/fakewebhook; devkit/fakemcp, the fake MCP upstream,
// draws its random faults here too) share to inject faults into the requests they serve: an Injector of queued and random faults, Hangs that
// hold requests until released, and the dropped connection and Retry-After
// every fake answers the same way.
//
// It is not API: each fake keeps its own Fault and FaultKind, whose kinds
// differ from vendor to vendor, and wraps what it needs from here.
package fakefault

// Package notify delivers approval notifications: whenever an op starts waiting for a
// person, a signed JSON POST to a URL (Config), such as a Slack incoming webhook or an
// approvers' service. The receiver checks the signature (Sign) and deduplicates by the
// op id.
//
// The Outbox owns every job, the notifications included: outbox.New builds a Notifier
// with New from outbox.Config.Notify, handing it a Deps struct (the logger), and
// registers its worker on the Outbox's River client. The Outbox builds each
// notification's arguments (Args, kind "oncebox.notify_approval", on Queue) and inserts
// its job with InsertTx in the transaction in which the op starts waiting, so a crash
// loses none; River retries a delivery until the receiver answers 2xx, for about a day.
// The package never imports outbox.
package notify

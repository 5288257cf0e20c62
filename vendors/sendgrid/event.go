package sendgrid

import "encoding/json"

// MessageID is the X-Message-Id of an Event Webhook sg_message_id or an activity
// msg_id: everything before the first '.'.
func MessageID(sgMessageID string) string { return messageID(sgMessageID) }

// AcceptedSummary is the result Dispatch stores for a message SendGrid accepted, and
// the Summary of a message found by Lookup: an event about the message proves the
// same acceptance.
func AcceptedSummary(messageID string) json.RawMessage { return resultJSON(messageID, acceptedStatus) }

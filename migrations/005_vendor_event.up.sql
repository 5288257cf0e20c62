-- Vendor events (Stripe webhooks, SendGrid's Event Webhook) as oncebox stores them: what
-- each event says about one vendor object, never its payload (no client secret, no
-- address). op_tag is the event's oncebox_op tag; there is no foreign key, since events
-- may arrive after their op was purged, or name no op at all (orphan, as seen on arrival).
CREATE TABLE oncebox_vendor_event (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    vendor         text        NOT NULL,
    -- event_id deduplicates redeliveries: Stripe's evt_ id; for SendGrid, whose
    -- sg_event_id changes between redeliveries, a hash of message, event and timestamp.
    event_id       text        NOT NULL,
    event_type     text        NOT NULL,
    op_tag         text        NOT NULL,
    object_type    text        NOT NULL,
    object_id      text        NOT NULL,
    status         text        NOT NULL,
    amount         bigint,
    currency       text,
    object_created timestamptz,
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    orphan         boolean     NOT NULL,
    summary        jsonb,
    CONSTRAINT oncebox_vendor_event_unique UNIQUE (vendor, event_id)
);
CREATE INDEX oncebox_vendor_event_op ON oncebox_vendor_event (op_tag, vendor);
CREATE INDEX oncebox_vendor_event_received ON oncebox_vendor_event (received_at);
